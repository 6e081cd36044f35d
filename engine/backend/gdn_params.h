// The arguments of the Gated DeltaNet op (MODELS.md §12), defined once:
// Backend::GdnScan takes them, the CPU loop reads them, and the CUDA kernel
// receives them by value. Plain data, no absl: nvcc includes this header.
// The short conv over q, k and v is Mamba-1's MambaConv (no bias), the
// projections are GEMMs.
//
// Pointers are the backend's memory (device memory on CUDA). Segments of one
// call have distinct slots, except zero-length ones (decode padding), which
// may share a real segment's slot and touch no state.
#ifndef SEQBOAT_ENGINE_BACKEND_GDN_PARAMS_H_
#define SEQBOAT_ENGINE_BACKEND_GDN_PARAMS_H_

#include <stdint.h>

#include "engine/backend/segment.h"

namespace seqboat {

// Over each segment's tokens in order, for every value head h of key head
// κ = h / (v_heads / k_heads):
//   q̂, k̂ = q_κ, k_κ / sqrt(Σ² + 1e-6), q̂ /= sqrt(k_dim)
//   β = σ(b_h), decay = exp(A_h · softplus(a_h + dt_bias_h))
//   S ← decay S;  S ← S + k̂ ⊗ β (v_h − Sᵀ k̂);  o = Sᵀ q̂
//   out_h = norm_w ⊙ o / rms(o) ⊙ SiLU(z_h)   (normalised, then gated)
// with the state S [k_dim, v_dim] per value head in the sequence's slot.
struct GdnScanParams {
  const Segment* segs = nullptr;
  int nsegs = 0;
  // Rows of the post-conv [q ; k ; v] (k_heads·k_dim, k_heads·k_dim,
  // v_heads·v_dim columns), row stride ldqkv.
  const float* qkv = nullptr;
  int ldqkv = 0;
  // z [v_heads·v_dim], b and a [v_heads] of each row, row stride ldz.
  const float* z = nullptr;
  const float* b = nullptr;
  const float* a = nullptr;
  int ldz = 0;
  const float* a_coef = nullptr;   // [v_heads], A = -exp(A_log)
  const float* dt_bias = nullptr;  // [v_heads]
  const float* norm_w = nullptr;   // [v_dim], shared by the heads
  float norm_eps = 0.0f;
  float* state = nullptr;    // slot s's [v_heads, k_dim, v_dim] at
  int64_t state_stride = 0;  // state + s * state_stride
  int k_heads = 0;
  int v_heads = 0;  // a multiple of k_heads
  int k_dim = 0;
  int v_dim = 0;
  float* out = nullptr;  // [n, v_heads·v_dim], row stride ldo
  int ldo = 0;
};

}  // namespace seqboat

#endif  // SEQBOAT_ENGINE_BACKEND_GDN_PARAMS_H_
