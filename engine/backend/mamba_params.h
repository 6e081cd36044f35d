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

#include "engine/backend/dense_params.h"
#include "engine/backend/half_rows.h"
#include "engine/backend/hd.h"
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

// Mamba-1's dt_proj folded into the scan (MambaScanParams::dt_proj), as
// GemmParams::norm folds a pre-norm into a GEMM: with w.data set, the scan's
// dt is low · wᵀ (the GEMM of GemmOfDtProj below) and MambaScanParams::dt is
// not read. A backend either runs that GEMM into `dt` and then the plain scan
// (the CPU, so its results are the unfolded ops' bits) or has the scan
// compute each channel's dt itself (CUDA's decode scan: no launch of its own,
// dt never in memory).
struct MambaDtProj {
  const float* low = nullptr;  // δ̃ [n, w.cols] (xdbl's first dt_rank columns)
  int ldlow = 0;
  int n = 0;            // rows of low and dt
  Matrix w;             // dt_proj [e, dt_rank], any storage of the backend's
  float* dt = nullptr;  // [n, e] scratch for a backend that runs the GEMM
};

// Selective scan over each segment's tokens:
// out = (C·h + D x) SiLU(z), h updated in place.
struct MambaScanParams {
  const Segment* segs = nullptr;
  int nsegs = 0;
  const float* x = nullptr;  // conv outputs [n, e]
  // W_dt δ̃ [n, e], before bias and softplus; unread when dt_proj folds it.
  const float* dt = nullptr;
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
  MambaDtProj dt_proj;  // folded when dt_proj.w.data is set
};

SEQBOAT_HD bool FoldsDtProj(const MambaScanParams& p) {
  return p.dt_proj.w.data != nullptr;
}

// The GEMM a folded dt_proj stands for: dt = low · wᵀ, no bias (the scan adds
// dt_bias before its softplus).
inline GemmParams GemmOfDtProj(const MambaScanParams& p) {
  GemmParams g;
  g.x = p.dt_proj.low;
  g.ldx = p.dt_proj.ldlow;
  g.n = p.dt_proj.n;
  g.w = p.dt_proj.w;
  g.y = p.dt_proj.dt;
  g.ldy = p.e;
  return g;
}

// The plain scan that follows GemmOfDtProj: it reads the GEMM's dt.
inline MambaScanParams ScanAfterDtProj(const MambaScanParams& p) {
  MambaScanParams s = p;
  s.dt = p.dt_proj.dt;
  s.dt_proj = MambaDtProj();
  return s;
}

// The conv op a GEMM's folded conv stands for: its input is y's first e
// columns as the GEMM left them.
inline MambaConvParams ConvOfGemm(const GemmParams& p) {
  MambaConvParams c;
  c.segs = p.conv.segs;
  c.nsegs = p.conv.nsegs;
  c.x = p.y;
  c.ldx = p.ldy;
  c.state = p.conv.state;
  c.state_stride = p.conv.state_stride;
  c.w = p.conv.w;
  c.bias = p.conv.bias;
  c.e = p.conv.e;
  c.k = p.conv.k;
  c.out = p.conv.out;
  c.out16 = p.conv.out16;
  return c;
}

}  // namespace seqboat

#endif  // SEQBOAT_ENGINE_BACKEND_MAMBA_PARAMS_H_
