// Dense kernels: rows are independent, so grids map blocks to rows and
// threads to columns; reductions (norms) use one block per row.
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include "engine/backend/ffn_math.h"
#include "engine/backend/op_math.h"
#include "kernels/dense_kernels.h"

namespace seqboat::cuda {
namespace {

constexpr int kThreads = 256;

__device__ __forceinline__ float Load(const void* p, Storage s, int64_t i) {
  switch (s) {
    case Storage::kBf16:
      return __bfloat162float(static_cast<const __nv_bfloat16*>(p)[i]);
    case Storage::kF16:
      return __half2float(static_cast<const __half*>(p)[i]);
    default:
      return static_cast<const float*>(p)[i];
  }
}

// Sum over the block; every thread gets the result.
__device__ float BlockSum(float v) {
  __shared__ float partial[32];
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  __syncthreads();  // partial[] may still be read by a previous call
  if (lane == 0) partial[warp] = v;
  __syncthreads();
  const int warps = (blockDim.x + 31) >> 5;
  v = lane < warps ? partial[lane] : 0.0f;
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}

__global__ void EmbedKernel(EmbedParams p) {
  const int i = blockIdx.x;
  const int64_t row = static_cast<int64_t>(p.ids[i]) * p.d;
  float* out = p.out + static_cast<int64_t>(i) * p.d;
  for (int j = threadIdx.x; j < p.d; j += blockDim.x) {
    out[j] = p.scale * Load(p.table, p.storage, row + j);
  }
}

__global__ void RmsNormKernel(const float* x, int ldx, int d, const float* w,
                              float eps, float* out, int ldo) {
  const float* xi = x + static_cast<int64_t>(blockIdx.x) * ldx;
  float* oi = out + static_cast<int64_t>(blockIdx.x) * ldo;
  float sq = 0.0f;
  for (int j = threadIdx.x; j < d; j += blockDim.x) sq += xi[j] * xi[j];
  const float s = op_math::RmsScale(BlockSum(sq), d, eps);
  for (int j = threadIdx.x; j < d; j += blockDim.x) {
    oi[j] = w != nullptr ? xi[j] * s * w[j] : xi[j] * s;
  }
}

__global__ void LayerNormKernel(const float* x, int d, const float* w,
                                const float* b, float eps, float* out) {
  const float* xi = x + static_cast<int64_t>(blockIdx.x) * d;
  float* oi = out + static_cast<int64_t>(blockIdx.x) * d;
  float sum = 0.0f;
  for (int j = threadIdx.x; j < d; j += blockDim.x) sum += xi[j];
  const float mean = BlockSum(sum) / static_cast<float>(d);
  float var = 0.0f;
  for (int j = threadIdx.x; j < d; j += blockDim.x) {
    const float c = xi[j] - mean;
    var += c * c;
  }
  const float inv = rsqrtf(BlockSum(var) / static_cast<float>(d) + eps);
  for (int j = threadIdx.x; j < d; j += blockDim.x) {
    float v = (xi[j] - mean) * inv;
    if (w != nullptr) v *= w[j];
    if (b != nullptr) v += b[j];
    oi[j] = v;
  }
}

__global__ void GatherRowsKernel(const float* x, int d, const int32_t* rows,
                                 float* out) {
  const float* src = x + static_cast<int64_t>(rows[blockIdx.x]) * d;
  float* dst = out + static_cast<int64_t>(blockIdx.x) * d;
  for (int j = threadIdx.x; j < d; j += blockDim.x) dst[j] = src[j];
}

__global__ void ConvertRowsKernel(const float* x, int ldx, int d, void* out,
                                  Storage s) {
  const float* xi = x + static_cast<int64_t>(blockIdx.x) * ldx;
  const int64_t base = static_cast<int64_t>(blockIdx.x) * d;
  for (int j = threadIdx.x; j < d; j += blockDim.x) {
    if (s == Storage::kBf16) {
      static_cast<__nv_bfloat16*>(out)[base + j] = __float2bfloat16(xi[j]);
    } else if (s == Storage::kF16) {
      static_cast<__half*>(out)[base + j] = __float2half(xi[j]);
    } else {
      static_cast<float*>(out)[base + j] = xi[j];
    }
  }
}

__global__ void AddBiasKernel(float* y, int ldy, int d, const float* v) {
  float* yi = y + static_cast<int64_t>(blockIdx.x) * ldy;
  for (int j = threadIdx.x; j < d; j += blockDim.x) yi[j] += v[j];
}

__global__ void ActivateMulKernel(ActivateMulParams p) {
  const int64_t i = blockIdx.x;
  const float* a = p.a + i * p.lda;
  const float* b = p.b != nullptr ? p.b + i * p.ldb : nullptr;
  float* o = p.out + i * p.ldo;
  for (int j = threadIdx.x; j < p.f; j += blockDim.x) {
    float v = op_math::Activate(p.act, a[j]);
    if (b != nullptr) v *= b[j];
    o[j] = p.accumulate ? o[j] + v : v;
  }
}

__global__ void ScatterAddScaledKernel(const float* src, int d,
                                       const int32_t* rows, const float* scales,
                                       int m, float* dst, int lddst) {
  const int c = blockIdx.x * blockDim.x + threadIdx.x;
  if (c >= d) return;
  for (int j = 0; j < m; ++j) {
    dst[static_cast<int64_t>(rows[j]) * lddst + c] +=
        scales[j] * src[static_cast<int64_t>(j) * d + c];
  }
}

__global__ void MoeRouteKernel(const float* logits, int n, int x,
                               MoeRouting routing, int top_k, bool renormalize,
                               int32_t* experts, float* gates) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  const int slots = routing == MoeRouting::kReluDynamic ? x : top_k;
  op_math::RouteRow(logits + static_cast<int64_t>(i) * x, x, routing, top_k,
                    renormalize, experts + static_cast<int64_t>(i) * slots,
                    gates + static_cast<int64_t>(i) * slots);
}

int ThreadsFor(int d) {
  // Enough warps to cover a row once when it is short, 256 otherwise.
  const int warps = (d + 31) / 32;
  return warps >= kThreads / 32 ? kThreads : (warps < 1 ? 32 : warps * 32);
}

}  // namespace

void LaunchEmbed(const EmbedParams& p, cudaStream_t stream) {
  if (p.n <= 0) return;
  EmbedKernel<<<p.n, ThreadsFor(p.d), 0, stream>>>(p);
}

void LaunchRmsNorm(const float* x, int ldx, int n, int d, const float* w,
                   float eps, float* out, int ldo, cudaStream_t stream) {
  if (n <= 0) return;
  RmsNormKernel<<<n, ThreadsFor(d), 0, stream>>>(x, ldx, d, w, eps, out, ldo);
}

void LaunchLayerNorm(const float* x, int n, int d, const float* w,
                     const float* b, float eps, float* out,
                     cudaStream_t stream) {
  if (n <= 0) return;
  LayerNormKernel<<<n, ThreadsFor(d), 0, stream>>>(x, d, w, b, eps, out);
}

void LaunchGatherRows(const float* x, int d, const int32_t* rows, int m,
                      float* out, cudaStream_t stream) {
  if (m <= 0) return;
  GatherRowsKernel<<<m, ThreadsFor(d), 0, stream>>>(x, d, rows, out);
}

void LaunchConvertRows(const float* x, int ldx, int n, int d, void* out,
                       Storage storage, cudaStream_t stream) {
  if (n <= 0) return;
  ConvertRowsKernel<<<n, ThreadsFor(d), 0, stream>>>(x, ldx, d, out, storage);
}

void LaunchAddBias(float* y, int ldy, int n, int d, const float* v,
                   cudaStream_t stream) {
  if (n <= 0) return;
  AddBiasKernel<<<n, ThreadsFor(d), 0, stream>>>(y, ldy, d, v);
}

void LaunchActivateMul(const ActivateMulParams& p, cudaStream_t stream) {
  if (p.n <= 0) return;
  ActivateMulKernel<<<p.n, ThreadsFor(p.f), 0, stream>>>(p);
}

void LaunchScatterAddScaled(const float* src, int d, const int32_t* rows,
                            const float* scales, int m, float* dst, int lddst,
                            cudaStream_t stream) {
  if (m <= 0) return;
  ScatterAddScaledKernel<<<(d + kThreads - 1) / kThreads, kThreads, 0,
                           stream>>>(src, d, rows, scales, m, dst, lddst);
}

void LaunchMoeRoute(const float* logits, int n, int x, MoeRouting routing,
                    int top_k, bool renormalize, int32_t* experts, float* gates,
                    cudaStream_t stream) {
  if (n <= 0) return;
  MoeRouteKernel<<<(n + 127) / 128, 128, 0, stream>>>(
      logits, n, x, routing, top_k, renormalize, experts, gates);
}

}  // namespace seqboat::cuda
