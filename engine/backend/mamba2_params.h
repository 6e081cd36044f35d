// The arguments of Mamba-2's ops (MODELS.md §7.4-7.6), each defined once:
// Backend::Mamba2Scan, Backend::GatedRmsNorm and Backend::Mamba2Step take
// them, the CPU loops read them, and the CUDA kernels receive them by value.
// Plain data, no absl: nvcc includes this header. The conv over xBC is
// Mamba-1's MambaConv.
//
// Pointers are the backend's memory (device memory on CUDA). Segments of one
// call have distinct slots, except zero-length ones (decode padding), which
// may share a real segment's slot and touch no state.
#ifndef SEQBOAT_ENGINE_BACKEND_MAMBA2_PARAMS_H_
#define SEQBOAT_ENGINE_BACKEND_MAMBA2_PARAMS_H_

#include <stdint.h>

#include "engine/backend/mamba_params.h"
#include "engine/backend/segment.h"

namespace seqboat {

// The multi-head SSD recurrence over each segment's tokens, with B and C
// shared by the heads of a group (head h reads group h / (heads / groups)):
//   Δ = clamp(softplus(δ + dt_bias), dt_min, dt_max)
//   h ← exp(Δ A) h + Δ x ⊗ B,   out = h · C + D x
// The gate and the norm are GatedRmsNorm's.
struct Mamba2ScanParams {
  const Segment* segs = nullptr;
  int nsegs = 0;
  // Rows of the post-conv xBC, all with stride ldxbc: x [heads * head_dim]
  // (channel h * head_dim + p), B and C [groups * n_state] each.
  const float* x = nullptr;
  const float* b = nullptr;
  const float* c = nullptr;
  int ldxbc = 0;
  const float* dt = nullptr;  // raw δ [n, heads], row stride lddt
  int lddt = 0;
  const float* dt_bias = nullptr;  // [heads]
  const float* a = nullptr;        // [heads], A = -exp(A_log)
  const float* d = nullptr;        // [heads]
  float dt_min = 0.0f;
  float dt_max = 0.0f;       // INFINITY when unbounded
  float* state = nullptr;    // slot s's [heads, head_dim, n_state] at
  int64_t state_stride = 0;  // state + s * state_stride
  int heads = 0;
  int head_dim = 0;
  int n_state = 0;
  int groups = 0;        // divides heads
  float* out = nullptr;  // [n, heads * head_dim], row stride ldo
  int ldo = 0;
};

// out = w ⊙ v / rms(v) with v = y ⊙ SiLU(z), the RMS taken over each of
// `groups` equal column groups of a row on its own (mamba_ssm's RMSNormGated
// with norm_before_gate = false; groups = 1 is HF's MambaRMSNormGated).
struct GatedRmsNormParams {
  const float* y = nullptr;  // [n, d], row stride ldy
  int ldy = 0;
  const float* z = nullptr;  // the gate [n, d], row stride ldz
  int ldz = 0;
  const float* w = nullptr;  // [d]
  int n = 0;
  int d = 0;
  int groups = 0;  // divides d
  float eps = 0.0f;
  float* out = nullptr;  // [n, d], row stride ldo; may alias y
  int ldo = 0;
  HalfRows out16;  // out in 16 bits too, for out_proj (half_rows.h)
};

// The mixer between Mamba-2's projections as one op: the conv over xBC, the
// scan over the conv's output and the gated norm of the scan's output, each
// with its own params, equal to MambaConv(conv), Mamba2Scan(scan),
// GatedRmsNorm(norm) in that order (the CPU backend's definition). The CUDA
// backend runs a decode call (AllDecodeRows) in two kernels, the conv and the
// scan of a head in one, so xBC never goes through memory; conv.out is then
// left unwritten, and rows of zero-length segments in norm.out as they were.
// Its layout: scan.x = conv.out, scan.b = scan.x + heads * head_dim,
// scan.c = scan.b + groups * n_state, scan.ldxbc = conv.e, norm.y =
// scan.out, norm.d = heads * head_dim (engine/layers/mamba2.cc's).
struct Mamba2StepParams {
  MambaConvParams conv;
  Mamba2ScanParams scan;
  GatedRmsNormParams norm;
};

}  // namespace seqboat

#endif  // SEQBOAT_ENGINE_BACKEND_MAMBA2_PARAMS_H_
