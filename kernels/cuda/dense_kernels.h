// Launchers of the dense kernels (dense_kernels.cu): embedding gather, norms,
// row gather/scatter, activations, bias, weight-dtype conversion and the MoE
// router. Pointers are device memory unless a field says otherwise; each
// launcher enqueues on `stream` and returns at once. n == 0 launches nothing.
#ifndef SEQBOAT_KERNELS_CUDA_DENSE_KERNELS_H_
#define SEQBOAT_KERNELS_CUDA_DENSE_KERNELS_H_

#include <cuda_runtime_api.h>
#include <stdint.h>

#include "engine/backend/ffn_math.h"

namespace seqboat::cuda {

// How a weight matrix is stored on the device.
enum class Storage : int32_t { kF32, kBf16, kF16 };

// out[i, :] = scale * table[ids[i], :] in fp32.
struct EmbedParams {
  const int32_t* ids = nullptr;
  int n = 0;
  const void* table = nullptr;
  Storage storage = Storage::kF32;
  int d = 0;
  float scale = 1.0f;
  float* out = nullptr;
};
void LaunchEmbed(const EmbedParams& p, cudaStream_t stream);

// RMSNorm over the first d columns of rows with strides ldx / ldo; w may be
// null; out may alias x. One block per row.
void LaunchRmsNorm(const float* x, int ldx, int n, int d, const float* w,
                   float eps, float* out, int ldo, cudaStream_t stream);

// LayerNorm over contiguous rows; w, b may be null.
void LaunchLayerNorm(const float* x, int n, int d, const float* w,
                     const float* b, float eps, float* out,
                     cudaStream_t stream);

// out[j, :] = x[rows[j], :].
void LaunchGatherRows(const float* x, int d, const int32_t* rows, int m,
                      float* out, cudaStream_t stream);

// out [n, d] contiguous = x [n, d] (row stride ldx) in `storage` (a GEMM's
// input in the weights' type).
void LaunchConvertRows(const float* x, int ldx, int n, int d, void* out,
                       Storage storage, cudaStream_t stream);

// y[i, r] (+)= x[i, :] · W[r, :] + bias[r] for n <= kGemvMaxRows rows of x:
// one warp per output r (or up to 8 splitting its columns, when there are
// too few rows to fill the device) reads W's row once for all n inputs,
// straight from its storage type (no conversion pass), so small decode
// batches run at the speed of reading the weights. Each x row's sum has the
// same order whatever n is, so padding a batch does not change its results.
inline constexpr int kGemvMaxRows = 8;
struct GemvParams {
  const float* x = nullptr;
  int ldx = 0;
  int n = 0;
  const void* w = nullptr;
  Storage storage = Storage::kF32;
  int rows = 0;
  int cols = 0;
  const float* bias = nullptr;  // [rows] or null
  float* y = nullptr;
  int ldy = 0;
  bool accumulate = false;
};
void LaunchGemv(const GemvParams& p, cudaStream_t stream);

// y[i, :d] += v.
void LaunchAddBias(float* y, int ldy, int n, int d, const float* v,
                   cudaStream_t stream);

// out[i, j] (+)= act(a[i, j]) * b[i, j] (b null: * 1); out may alias a.
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
};
void LaunchActivateMul(const ActivateMulParams& p, cudaStream_t stream);

// dst[rows[j], :d] += scales[j] * src[j, :d], j in order. Rows may repeat
// (a token routed to two experts appears twice), so one thread owns a column
// and walks j in order: no atomics, the CPU's summation order.
void LaunchScatterAddScaled(const float* src, int d, const int32_t* rows,
                            const float* scales, int m, float* dst, int lddst,
                            cudaStream_t stream);

// One router row per thread (op_math::RouteRow).
void LaunchMoeRoute(const float* logits, int n, int x, MoeRouting routing,
                    int top_k, bool renormalize, int32_t* experts, float* gates,
                    cudaStream_t stream);

}  // namespace seqboat::cuda

#endif  // SEQBOAT_KERNELS_CUDA_DENSE_KERNELS_H_
