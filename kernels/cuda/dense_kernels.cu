// Dense kernels: rows are independent, so grids map blocks to rows and
// threads to columns; reductions (norms) use one block per row.
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include "engine/backend/ffn_math.h"
#include "engine/backend/op_math.h"
#include "kernels/cuda/dense_kernels.h"
#include "kernels/cuda/fp8.cuh"
#include "kernels/cuda/half_rows.cuh"
#include "kernels/cuda/launch.cuh"
#include "kernels/cuda/norm_rows.cuh"

namespace seqboat::cuda {
namespace {

constexpr int kThreads = 256;

__device__ __forceinline__ float Load(const void* p, Storage s, int64_t i) {
  switch (s) {
    case Storage::kBf16:
      return __bfloat162float(static_cast<const __nv_bfloat16*>(p)[i]);
    case Storage::kF16:
      return __half2float(static_cast<const __half*>(p)[i]);
    case Storage::kFp8E4m3:  // the code's value; the row scale is the caller's
      return 256.0f * Fp8Over256(static_cast<const uint8_t*>(p)[i]);
    default:
      return static_cast<const float*>(p)[i];
  }
}

__global__ void EmbedKernel(EmbedParams p, Storage storage,
                            const int32_t* fed_map) {
  JoinLaunchChain();
  const int i = blockIdx.x;
  const int d = static_cast<int>(p.table.cols);
  int32_t id = p.ids[i];
  if (fed_map != nullptr && fed_map[i] <= -2)
    id = p.fed_tokens[-fed_map[i] - 2];
  const int64_t row = static_cast<int64_t>(id) * d;
  float* out = p.out + static_cast<int64_t>(i) * d;
  // fp8: the stored weight is the code's value times its row's scale.
  const float row_scale = storage == Storage::kFp8E4m3
                              ? Fp8RowScales(p.table.data, p.table.rows, d)[id]
                              : 1.0f;
  for (int j = threadIdx.x; j < d; j += blockDim.x) {
    out[j] = p.scale * (Load(p.table.data, storage, row + j) * row_scale);
  }
}

// One block per row; the arithmetic is norm_rows.cuh's, which the GEMV's
// folded pre-norm shares.
template <NormKind kKind>
__global__ void NormKernel(NormParams p, HalfRows out16) {
  JoinLaunchChain();
  const float* xi = p.x + static_cast<int64_t>(blockIdx.x) * p.ldx;
  float* oi = p.out + static_cast<int64_t>(blockIdx.x) * p.ldo;
  float scale[1], mean[1];
  RowNormStats<1>(kKind, xi, p.ldx, p.d, p.eps, scale, mean);
  const float* b = kKind == NormKind::kLayer ? p.b : nullptr;
  for (int j = threadIdx.x; j < p.d; j += blockDim.x) {
    const float v = NormedValue(kKind, xi[j], scale[0], mean[0], p.w != nullptr,
                                p.w != nullptr ? p.w[j] : 0.0f, b != nullptr,
                                b != nullptr ? b[j] : 0.0f);
    oi[j] = v;
    StoreHalf(out16, blockIdx.x, j, v);
  }
}

__global__ void GatherRowsKernel(GatherRowsParams p) {
  JoinLaunchChain();
  const float* src = p.x + static_cast<int64_t>(p.rows[blockIdx.x]) * p.d;
  float* dst = p.out + static_cast<int64_t>(blockIdx.x) * p.d;
  for (int j = threadIdx.x; j < p.d; j += blockDim.x) dst[j] = src[j];
}

__global__ void ConvertRowsKernel(const float* x, int ldx, int d, void* out,
                                  Storage s) {
  JoinLaunchChain();
  const float* xi = x + static_cast<int64_t>(blockIdx.x) * ldx;
  HalfRows rows;
  rows.data = out;
  rows.ld = d;
  rows.format = s == Storage::kBf16  ? HalfFormat::kBf16
                : s == Storage::kF16 ? HalfFormat::kF16
                                     : HalfFormat::kNone;
  for (int j = threadIdx.x; j < d; j += blockDim.x) {
    if (rows.format != HalfFormat::kNone) {
      StoreHalf(rows, blockIdx.x, j, xi[j]);
    } else {
      static_cast<float*>(out)[static_cast<int64_t>(blockIdx.x) * d + j] =
          xi[j];
    }
  }
}

__global__ void DequantizeFp8Kernel(const void* w, int rows, int cols,
                                    void* out) {
  JoinLaunchChain();
  const int64_t row = static_cast<int64_t>(blockIdx.x) * cols;
  const float scale = Fp8RowScales(w, rows, cols)[blockIdx.x];
  auto* o = static_cast<__nv_bfloat16*>(out);
  for (int j = threadIdx.x; j < cols; j += blockDim.x) {
    o[row + j] = __float2bfloat16(scale * Load(w, Storage::kFp8E4m3, row + j));
  }
}

__global__ void AddBiasKernel(AddBiasParams p) {
  JoinLaunchChain();
  float* yi = p.y + static_cast<int64_t>(blockIdx.x) * p.ldy;
  for (int j = threadIdx.x; j < p.d; j += blockDim.x) yi[j] += p.v[j];
}

__global__ void ActivateMulKernel(ActivateMulParams p) {
  JoinLaunchChain();
  const int64_t i = blockIdx.x;
  const float* a = p.a + i * p.lda;
  const float* b = p.b != nullptr ? p.b + i * p.ldb : nullptr;
  float* o = p.out + i * p.ldo;
  for (int j = threadIdx.x; j < p.f; j += blockDim.x) {
    float v = op_math::Activate(p.act, a[j]);
    if (b != nullptr) v *= b[j];
    if (p.accumulate) v += o[j];
    o[j] = v;
    StoreHalf(p.out16, i, j, v);
  }
}

__global__ void ScatterAddScaledKernel(ScatterAddParams p) {
  JoinLaunchChain();
  const int c = blockIdx.x * blockDim.x + threadIdx.x;
  if (c >= p.d) return;
  for (int j = 0; j < p.m; ++j) {
    float* dst = p.dst + static_cast<int64_t>(p.rows[j]) * p.lddst + c;
    *dst = ScaledResidualAdd(*dst, p.scales[j],
                             p.src[static_cast<int64_t>(j) * p.d + c]);
  }
}

__global__ void MoeRouteKernel(MoeRouteParams p) {
  JoinLaunchChain();
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= p.n) return;
  const int slots = p.routing == MoeRouting::kReluDynamic ? p.x : p.top_k;
  op_math::RouteRow(p.logits + static_cast<int64_t>(i) * p.x, p.x, p.routing,
                    p.top_k, p.renormalize, p.scale, p.group,
                    p.experts + static_cast<int64_t>(i) * slots,
                    p.gates + static_cast<int64_t>(i) * slots);
}

int ThreadsFor(int d) {
  // Enough warps to cover a row once when it is short, 256 otherwise.
  const int warps = (d + 31) / 32;
  return warps >= kThreads / 32 ? kThreads : (warps < 1 ? 32 : warps * 32);
}

}  // namespace

void LaunchEmbed(const EmbedParams& p, Storage storage, const int32_t* fed_map,
                 LaunchQueue queue) {
  if (p.n <= 0) return;
  SEQBOAT_LAUNCH_ON(p.n, ThreadsFor(static_cast<int>(p.table.cols)), 0, queue,
                    EmbedKernel)
  (p, storage, fed_map);
}

void LaunchRmsNorm(const NormParams& p, LaunchQueue queue,
                   const HalfRows& out16) {
  if (p.n <= 0) return;
  SEQBOAT_LAUNCH_ON(p.n, ThreadsFor(p.d), 0, queue, NormKernel<NormKind::kRms>)
  (p, out16);
}

void LaunchLayerNorm(const NormParams& p, LaunchQueue queue,
                     const HalfRows& out16) {
  if (p.n <= 0) return;
  SEQBOAT_LAUNCH_ON(p.n, ThreadsFor(p.d), 0, queue,
                    NormKernel<NormKind::kLayer>)
  (p, out16);
}

void LaunchGatherRows(const GatherRowsParams& p, LaunchQueue queue) {
  if (p.m <= 0) return;
  SEQBOAT_LAUNCH_ON(p.m, ThreadsFor(p.d), 0, queue, GatherRowsKernel)(p);
}

void LaunchConvertRows(const float* x, int ldx, int n, int d, void* out,
                       Storage storage, LaunchQueue queue) {
  if (n <= 0) return;
  SEQBOAT_LAUNCH_ON(n, ThreadsFor(d), 0, queue, ConvertRowsKernel)
  (x, ldx, d, out, storage);
}

void LaunchDequantizeFp8(const void* w, int rows, int cols, void* out,
                         LaunchQueue queue) {
  if (rows <= 0 || cols <= 0) return;
  SEQBOAT_LAUNCH_ON(rows, ThreadsFor(cols), 0, queue, DequantizeFp8Kernel)
  (w, rows, cols, out);
}

void LaunchAddBias(const AddBiasParams& p, LaunchQueue queue) {
  if (p.n <= 0) return;
  SEQBOAT_LAUNCH_ON(p.n, ThreadsFor(p.d), 0, queue, AddBiasKernel)(p);
}

void LaunchActivateMul(const ActivateMulParams& p, LaunchQueue queue) {
  if (p.n <= 0) return;
  SEQBOAT_LAUNCH_ON(p.n, ThreadsFor(p.f), 0, queue, ActivateMulKernel)(p);
}

void LaunchScatterAddScaled(const ScatterAddParams& p, LaunchQueue queue) {
  // d == 0 would make an empty grid, which fails the launch.
  if (p.m <= 0 || p.d <= 0) return;
  SEQBOAT_LAUNCH_ON((p.d + kThreads - 1) / kThreads, kThreads, 0, queue,
                    ScatterAddScaledKernel)
  (p);
}

void LaunchMoeRoute(const MoeRouteParams& p, LaunchQueue queue) {
  if (p.n <= 0) return;
  SEQBOAT_LAUNCH_ON((p.n + 127) / 128, 128, 0, queue, MoeRouteKernel)(p);
}

}  // namespace seqboat::cuda
