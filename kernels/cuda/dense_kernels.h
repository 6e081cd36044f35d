// Launchers of the dense kernels (dense_kernels.cu): embedding gather, norms,
// row gather/scatter, activations, bias, weight-dtype conversion and the MoE
// router. They take the ops' own params (engine/backend/dense_params.h), with
// every pointer device memory (the backend stages the ops' host
// descriptors first); each launcher enqueues on `stream` and returns at
// once. n == 0 launches nothing.
#ifndef SEQBOAT_KERNELS_CUDA_DENSE_KERNELS_H_
#define SEQBOAT_KERNELS_CUDA_DENSE_KERNELS_H_

#include <cuda_runtime_api.h>
#include <stdint.h>

#include "engine/backend/dense_params.h"

namespace seqboat::cuda {

// How a weight matrix is stored on the device.
enum class Storage : int32_t { kF32, kBf16, kF16 };

// The table's rows in fp32; `storage` is how p.table is stored. fed_map
// (device, [n], from FedMapFor) says which rows take their id from
// p.fed_tokens instead of p.ids; null: none.
void LaunchEmbed(const EmbedParams& p, Storage storage, const int32_t* fed_map,
                 cudaStream_t stream);

// One block per row.
void LaunchRmsNorm(const NormParams& p, cudaStream_t stream);
void LaunchLayerNorm(const NormParams& p, cudaStream_t stream);

void LaunchGatherRows(const GatherRowsParams& p, cudaStream_t stream);

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

void LaunchAddBias(const AddBiasParams& p, cudaStream_t stream);

void LaunchActivateMul(const ActivateMulParams& p, cudaStream_t stream);

// Rows may repeat (a token routed to two experts appears twice), so one
// thread owns a column and walks j in order: no atomics, the CPU's
// summation order.
void LaunchScatterAddScaled(const ScatterAddParams& p, cudaStream_t stream);

// One router row per thread (op_math::RouteRow).
void LaunchMoeRoute(const MoeRouteParams& p, cudaStream_t stream);

}  // namespace seqboat::cuda

#endif  // SEQBOAT_KERNELS_CUDA_DENSE_KERNELS_H_
