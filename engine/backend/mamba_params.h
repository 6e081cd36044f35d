// The arguments of Mamba-1's recurrent ops (MODELS.md §1.3/1.4), each defined
// once, as mamba_ssm's SSMParamsBase is: Backend::MambaConv and
// Backend::MambaScan take them, the CPU loops read them, and the CUDA kernels
// receive them by value. Plain data, no absl: nvcc includes this header.
//
// Pointers are the backend's memory (device memory on CUDA). Segments of one
// call have distinct slots, except zero-length ones (decode padding), which
// may share a real segment's slot and touch no state. out16 (half_rows.h):
// the rows of out in 16 bits too, for the GEMM that reads them next
// (x_proj after the conv, out_proj after the scan); rows of zero-length
// segments are left as they were in both.
#ifndef SEQBOAT_ENGINE_BACKEND_MAMBA_PARAMS_H_
#define SEQBOAT_ENGINE_BACKEND_MAMBA_PARAMS_H_

#include <stdint.h>

#include "engine/backend/half_rows.h"
#include "engine/backend/segment.h"

namespace seqboat {

// Causal depthwise conv + SiLU over each segment's tokens.
struct MambaConvParams {
  const Segment* segs = nullptr;
  int nsegs = 0;
  const float* x = nullptr;  // pre-conv inputs [n, e], row stride ldx
  int ldx = 0;
  float* state = nullptr;  // slot s's [e, k-1] window at state + s*stride
  int64_t state_stride = 0;
  const float* w = nullptr;     // [e, k]
  const float* bias = nullptr;  // [e] or null
  int e = 0;
  int k = 0;
  float* out = nullptr;  // [n, e]
  HalfRows out16;
};

// Selective scan over each segment's tokens:
// out = (C·h + D x) SiLU(z), h updated in place.
struct MambaScanParams {
  const Segment* segs = nullptr;
  int nsegs = 0;
  const float* x = nullptr;   // conv outputs [n, e]
  const float* dt = nullptr;  // W_dt δ̃ [n, e], before bias and softplus
  const float* bc = nullptr;  // B at column 0, C at column n_state
  int ldbc = 0;
  const float* z = nullptr;  // the gate, row stride ldz
  int ldz = 0;
  const float* a = nullptr;        // [e, n_state]
  const float* d = nullptr;        // [e]
  const float* dt_bias = nullptr;  // [e]
  float* state = nullptr;          // slot s's [e, n_state] at state + s*stride
  int64_t state_stride = 0;
  int e = 0;
  int n_state = 0;
  float* out = nullptr;  // [n, e]
  HalfRows out16;
};

}  // namespace seqboat

#endif  // SEQBOAT_ENGINE_BACKEND_MAMBA_PARAMS_H_
