// The arguments of the dense ops (Backend::Embed, the norms, Gemm, the row
// gathers and scatters, the feed-forward and router ops), one struct per op
// as for the recurrent ops: layers fill them, both backends read them, and
// CUDA kernels receive them by value. Plain data, no absl: nvcc includes
// this header.
//
// Pointers are the backend's memory (device memory on CUDA) unless a field
// says "host": those are the host's in the op, and the CUDA backend hands its
// kernel a copy of the struct pointing at a device copy of them. Row
// strides (ld*) are in floats and given explicitly, even for contiguous
// rows.
#ifndef SEQBOAT_ENGINE_BACKEND_DENSE_PARAMS_H_
#define SEQBOAT_ENGINE_BACKEND_DENSE_PARAMS_H_

#include <math.h>
#include <stdint.h>

#include "engine/backend/ffn_math.h"
#include "engine/backend/half_rows.h"
#include "engine/backend/hd.h"
#include "engine/backend/segment.h"

namespace seqboat {

// A weight matrix [rows, cols] (PyTorch Linear layout: out x in) as the
// backend stores it. Owned by the backend's memory; the layer keeps the
// handle.
struct Matrix {
  const void* data = nullptr;
  int64_t rows = 0;
  int64_t cols = 0;
  // Stored in fp32 whatever the backend's storage type (UploadMatrixFp32).
  bool fp32 = false;
};

// out[i, :] = scale * table[ids[i], :]; table is a matrix [vocab, d] from
// UploadMatrix (so a tied head shares it); out is [n, d]. In a pipelined
// step, rows that continue a sequence take their id from the tokens the
// step before sampled, still in the backend's memory:
// ids[fed_rows[k]] = fed_tokens[fed_from[k]] for k < nfed.
struct EmbedParams {
  const int32_t* ids = nullptr;  // [n], host
  int n = 0;
  Matrix table;
  float scale = 1.0f;
  float* out = nullptr;
  const int32_t* fed_tokens = nullptr;  // Backend::SampledTokens()
  const int32_t* fed_rows = nullptr;    // [nfed], host
  const int32_t* fed_from = nullptr;    // [nfed], host
  int nfed = 0;
};

// Over the first d columns of n rows (strides ldx, ldo; out may alias x):
//   RmsNorm:   out = x / rms(x) * w                          (w may be null)
//   LayerNorm: out = (x - mean) / sqrt(var + eps) * w + b    (w, b may be null)
struct NormParams {
  const float* x = nullptr;
  int ldx = 0;
  int n = 0;
  int d = 0;
  const float* w = nullptr;
  const float* b = nullptr;  // LayerNorm only
  float eps = 0.0f;
  float* out = nullptr;
  int ldo = 0;
};

// A block's pre-norm folded into its input projection (GemmParams::norm):
// with kind != kNone the GEMM's input is Norm(x) over x's w.cols columns,
// exactly the NormParams of NormOfGemm below, and every backend also leaves
// Norm(x) in `out` (n rows of stride ldo, which must not overlap x or y),
// so that later ops of the block may read it. The CPU runs the norm op and
// then the GEMM; CUDA's small-batch GEMV normalises the activations as it
// loads them (gemv_kernels.h).
enum class NormKind : int8_t { kNone, kRms, kLayer };
struct GemmNorm {
  NormKind kind = NormKind::kNone;
  const float* w = nullptr;  // may be null
  const float* b = nullptr;  // kLayer only; may be null
  float eps = 0.0f;
  float* out = nullptr;
  int ldo = 0;
};

// Mamba-1's causal depthwise conv folded into its input projection
// (GemmParams::conv): with e > 0 the projection's output columns [0, e) are
// also the conv's input, and every backend leaves the conv done as
// MambaConv(ConvOfGemm(p)) would: out [n, e] = SiLU(taps · [window, y] +
// bias) for each segment's tokens, its window shifted in the slot's state,
// y written as without the conv. The fields are MambaConvParams's less its
// input. The CPU runs the GEMM then the conv op; CUDA's small-batch GEMV
// applies the conv where each output is final when every segment is a
// decode row (gemv_kernels.h), and runs the two ops otherwise.
struct GemmConv {
  const Segment* segs = nullptr;  // host
  int nsegs = 0;
  float* state = nullptr;  // slot s's [e, k-1] window at state + s*stride
  int64_t state_stride = 0;
  const float* w = nullptr;     // [e, k]
  const float* bias = nullptr;  // [e] or null
  int e = 0;                    // 0: no conv
  int k = 0;
  float* out = nullptr;  // [n, e]
  HalfRows out16;        // MambaConvParams::out16
};

// y[i, :w.rows] (+)= x[i, :w.cols] · wᵀ + bias; accumulate adds into y (the
// residual add of a block: on CUDA's GEMV the add is the GEMV's epilogue,
// no separate kernel), scaled by residual_scale: y = fma(s, f, y) with f =
// x · wᵀ + bias rounded to float first, one rounding for the add, exactly
// ScatterAddScaled of f (ScaledResidualAdd below); at s = 1 that is y + f.
// residual_scale is ignored without accumulate. With norm.kind != kNone, x
// is replaced by Norm(x) (GemmNorm); with conv.e > 0 the conv follows
// (GemmConv). x16: x already rounded to the format
// Backend::GemmInputFormat(w, n) names (half_rows.h), which the backend then
// reads instead of converting x; ignored in any other format, and with a
// norm (the backend rounds Norm(x) itself).
struct GemmParams {
  const float* x = nullptr;
  int ldx = 0;
  int n = 0;
  Matrix w;
  const float* bias = nullptr;  // [w.rows] or null
  float* y = nullptr;
  int ldy = 0;
  bool accumulate = false;
  float residual_scale = 1.0f;
  GemmNorm norm;
  GemmConv conv;
  HalfRows x16;
};

// The scaled residual add's one rounding, shared by every backend's GEMM
// epilogue and ScatterAddScaled: written as an fma so that no compiler's
// contraction choice (nvcc contracts by default, a host build may not)
// changes the bits.
SEQBOAT_HD float ScaledResidualAdd(float y, float s, float f) {
  return fmaf(s, f, y);
}

// The norm op a GEMM's folded pre-norm stands for.
inline NormParams NormOfGemm(const GemmParams& p) {
  NormParams n;
  n.x = p.x;
  n.ldx = p.ldx;
  n.n = p.n;
  n.d = static_cast<int>(p.w.cols);
  n.w = p.norm.w;
  n.b = p.norm.kind == NormKind::kLayer ? p.norm.b : nullptr;
  n.eps = p.norm.eps;
  n.out = p.norm.out;
  n.ldo = p.norm.ldo;
  return n;
}

// out[j, :] = x[rows[j], :] for j < m; x and out rows are d wide.
struct GatherRowsParams {
  const float* x = nullptr;
  int d = 0;
  const int32_t* rows = nullptr;  // [m], host
  int m = 0;
  float* out = nullptr;
};

// dst[rows[j], :d] += scales[j] * src[j, :d], in order j (deterministic
// accumulation: a row listed twice adds in list order).
struct ScatterAddParams {
  const float* src = nullptr;  // [m, d]
  int d = 0;
  const int32_t* rows = nullptr;  // [m], host
  const float* scales = nullptr;  // [m], host
  int m = 0;
  float* dst = nullptr;
  int lddst = 0;
};

// out[i, j] (+)= act(a[i, j]) * b[i, j] (b null: * 1) for j < f; out may
// alias a. out16: out's final values in 16 bits too (half_rows.h).
struct ActivateMulParams {
  const float* a = nullptr;
  int lda = 0;
  const float* b = nullptr;
  int ldb = 0;
  int n = 0;
  int f = 0;
  Activation act = Activation::kIdentity;
  float* out = nullptr;
  int ldo = 0;
  bool accumulate = false;
  HalfRows out16;
};

// y[i, :d] += v for every row i < n.
struct AddBiasParams {
  float* y = nullptr;
  int ldy = 0;
  int n = 0;
  int d = 0;
  const float* v = nullptr;  // [d]
};

// One router row per step row (ffn_math.h RouteRow): logits [n, x] ->
// experts / gates [n, slots], slots = top_k, or x for kReluDynamic.
struct MoeRouteParams {
  const float* logits = nullptr;
  int n = 0;
  int x = 0;
  MoeRouting routing = MoeRouting::kSoftmaxTopK;
  int top_k = 1;
  bool renormalize = false;
  float scale = 1.0f;     // every gate times this
  MoeGroupRouting group;  // kSigmoidGroupTopK only (score_bias: device)
  int32_t* experts = nullptr;
  float* gates = nullptr;
};

}  // namespace seqboat

#endif  // SEQBOAT_ENGINE_BACKEND_DENSE_PARAMS_H_
