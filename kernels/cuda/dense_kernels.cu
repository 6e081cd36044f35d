// Dense kernels: rows are independent, so grids map blocks to rows and
// threads to columns; reductions (norms) use one block per row.
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include "engine/backend/ffn_math.h"
#include "engine/backend/op_math.h"
#include "kernels/cuda/dense_kernels.h"
#include "kernels/cuda/launch.cuh"

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

__global__ void EmbedKernel(EmbedParams p, Storage storage,
                            const int32_t* fed_map) {
  const int i = blockIdx.x;
  const int d = static_cast<int>(p.table.cols);
  int32_t id = p.ids[i];
  if (fed_map != nullptr && fed_map[i] <= -2)
    id = p.fed_tokens[-fed_map[i] - 2];
  const int64_t row = static_cast<int64_t>(id) * d;
  float* out = p.out + static_cast<int64_t>(i) * d;
  for (int j = threadIdx.x; j < d; j += blockDim.x) {
    out[j] = p.scale * Load(p.table.data, storage, row + j);
  }
}

__global__ void RmsNormKernel(NormParams p) {
  const float* xi = p.x + static_cast<int64_t>(blockIdx.x) * p.ldx;
  float* oi = p.out + static_cast<int64_t>(blockIdx.x) * p.ldo;
  const int d = p.d;
  const float* w = p.w;
  float sq = 0.0f;
  for (int j = threadIdx.x; j < d; j += blockDim.x) sq += xi[j] * xi[j];
  const float s = op_math::RmsScale(BlockSum(sq), d, p.eps);
  for (int j = threadIdx.x; j < d; j += blockDim.x) {
    oi[j] = w != nullptr ? xi[j] * s * w[j] : xi[j] * s;
  }
}

__global__ void LayerNormKernel(NormParams p) {
  const float* xi = p.x + static_cast<int64_t>(blockIdx.x) * p.ldx;
  float* oi = p.out + static_cast<int64_t>(blockIdx.x) * p.ldo;
  const int d = p.d;
  const float *w = p.w, *b = p.b;
  float sum = 0.0f;
  for (int j = threadIdx.x; j < d; j += blockDim.x) sum += xi[j];
  const float mean = BlockSum(sum) / static_cast<float>(d);
  float var = 0.0f;
  for (int j = threadIdx.x; j < d; j += blockDim.x) {
    const float c = xi[j] - mean;
    var += c * c;
  }
  // The CPU's RmsScale (1 / sqrtf), not rsqrtf, which is up to 2 ulp off.
  const float inv = op_math::RmsScale(BlockSum(var), d, p.eps);
  for (int j = threadIdx.x; j < d; j += blockDim.x) {
    float v = (xi[j] - mean) * inv;
    if (w != nullptr) v *= w[j];
    if (b != nullptr) v += b[j];
    oi[j] = v;
  }
}

__global__ void GatherRowsKernel(GatherRowsParams p) {
  const float* src = p.x + static_cast<int64_t>(p.rows[blockIdx.x]) * p.d;
  float* dst = p.out + static_cast<int64_t>(blockIdx.x) * p.d;
  for (int j = threadIdx.x; j < p.d; j += blockDim.x) dst[j] = src[j];
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

__global__ void AddBiasKernel(AddBiasParams p) {
  float* yi = p.y + static_cast<int64_t>(blockIdx.x) * p.ldy;
  for (int j = threadIdx.x; j < p.d; j += blockDim.x) yi[j] += p.v[j];
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

__global__ void ScatterAddScaledKernel(ScatterAddParams p) {
  const int c = blockIdx.x * blockDim.x + threadIdx.x;
  if (c >= p.d) return;
  for (int j = 0; j < p.m; ++j) {
    p.dst[static_cast<int64_t>(p.rows[j]) * p.lddst + c] +=
        p.scales[j] * p.src[static_cast<int64_t>(j) * p.d + c];
  }
}

__global__ void MoeRouteKernel(MoeRouteParams p) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= p.n) return;
  const int slots = p.routing == MoeRouting::kReluDynamic ? p.x : p.top_k;
  op_math::RouteRow(p.logits + static_cast<int64_t>(i) * p.x, p.x, p.routing,
                    p.top_k, p.renormalize, p.scale, p.group,
                    p.experts + static_cast<int64_t>(i) * slots,
                    p.gates + static_cast<int64_t>(i) * slots);
}

// Eight consecutive weights of one row as floats, from 16 bytes (bf16/fp16)
// or two 16-byte loads (fp32). `at` is a multiple of 8.
__device__ __forceinline__ void Load8(const void* w, Storage s, int64_t at,
                                      float (&out)[8]) {
  if (s == Storage::kF32) {
    const float4* p =
        reinterpret_cast<const float4*>(static_cast<const float*>(w) + at);
    const float4 a = __ldg(p), b = __ldg(p + 1);
    out[0] = a.x, out[1] = a.y, out[2] = a.z, out[3] = a.w;
    out[4] = b.x, out[5] = b.y, out[6] = b.z, out[7] = b.w;
    return;
  }
  const uint4 raw = __ldg(
      reinterpret_cast<const uint4*>(static_cast<const uint16_t*>(w) + at));
  const uint32_t words[4] = {raw.x, raw.y, raw.z, raw.w};
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    const uint32_t u = words[i];
    if (s == Storage::kBf16) {
      // A bf16 is the top half of a float: widening is a shift.
      out[2 * i] = __uint_as_float(u << 16);
      out[2 * i + 1] = __uint_as_float(u & 0xffff0000u);
    } else {
      out[2 * i] =
          __half2float(__ushort_as_half(static_cast<unsigned short>(u)));
      out[2 * i + 1] =
          __half2float(__ushort_as_half(static_cast<unsigned short>(u >> 16)));
    }
  }
}

// Eight consecutive activations, as two 16-byte loads when `vector` (the
// caller checked alignment) and one at a time otherwise.
__device__ __forceinline__ void LoadX8(const float* x, bool vector,
                                       float (&out)[8]) {
  if (vector) {
    const float4 a = __ldg(reinterpret_cast<const float4*>(x));
    const float4 b = __ldg(reinterpret_cast<const float4*>(x) + 1);
    out[0] = a.x, out[1] = a.y, out[2] = a.z, out[3] = a.w;
    out[4] = b.x, out[5] = b.y, out[6] = b.z, out[7] = b.w;
    return;
  }
#pragma unroll
  for (int j = 0; j < 8; ++j) out[j] = __ldg(x + j);
}

constexpr int kGemvWarps = 8;  // warps per block
// Output rows per warp: each activation loaded serves this many weight rows,
// since L1 traffic for the activations (fp32, re-read for every row group)
// would otherwise exceed the weights' own.
constexpr int kGemvRowsPerWarp = 4;
constexpr int kGemvUnroll = 2;  // column passes whose loads are issued first
// Enough warps in flight to keep every multiprocessor's loads queued (16 per
// SM on a 132-SM H100/H200); fewer row groups than that split each group's
// columns over up to kGemvWarps warps of one block.
constexpr int kGemvTargetWarps = 132 * 16;

// A warp computes kGemvRowsPerWarp consecutive output rows, or its share of
// their columns when `split` (1, 2, 4 or 8) warps divide them: its lanes
// stride over the columns 8 at a time, the weights of kGemvUnroll passes
// loaded before their sums, each lane keeping rows x N partial sums; a
// butterfly reduction finishes a warp, and the split warps' sums are added
// in warp order through shared memory. The order depends on rows and cols
// only, never on n. The vector path needs cols % 8 == 0 and 16-byte aligned
// rows (checked on the host).
template <int N, bool kVector>
__global__ void __launch_bounds__(kGemvWarps * 32)
    GemvKernel(GemvParams p, int split) {
  constexpr int R = kGemvRowsPerWarp;
  static_assert(R * N <= 32, "a lane writes each output");
  __shared__ float partial[kGemvWarps][R][N];
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int r0 = (blockIdx.x * (kGemvWarps / split) + warp / split) * R;
  const int part = warp % split;
  float acc[R][N];
#pragma unroll
  for (int q = 0; q < R; ++q) {
#pragma unroll
    for (int i = 0; i < N; ++i) acc[q][i] = 0.0f;
  }
  if (r0 < p.rows) {
    // Rows past the last re-read the last (valid memory) and are not written.
    int64_t row[R];
#pragma unroll
    for (int q = 0; q < R; ++q) {
      row[q] = static_cast<int64_t>(min(r0 + q, p.rows - 1)) * p.cols;
    }
    if constexpr (kVector) {
      // x rows whose every 8-column group is 16-byte aligned are read two
      // 16-byte loads at a time: eight 4-byte loads 32 bytes apart across a
      // warp cost L1 eight times the wavefronts (seen on an H200).
      const bool x_vector =
          (reinterpret_cast<uintptr_t>(p.x) & 15) == 0 && (p.ldx & 3) == 0;
      const int stride = 32 * 8 * split;
      for (int c = (part * 32 + lane) * 8; c < p.cols;
           c += kGemvUnroll * stride) {
        float w[kGemvUnroll][R][8];
#pragma unroll
        for (int u = 0; u < kGemvUnroll; ++u) {
          if (c + u * stride < p.cols) {
#pragma unroll
            for (int q = 0; q < R; ++q) {
              Load8(p.w, p.storage, row[q] + c + u * stride, w[u][q]);
            }
          }
        }
#pragma unroll
        for (int u = 0; u < kGemvUnroll; ++u) {
          if (c + u * stride < p.cols) {
#pragma unroll
            for (int i = 0; i < N; ++i) {
              float xs[8];
              LoadX8(p.x + static_cast<int64_t>(i) * p.ldx + c + u * stride,
                     x_vector, xs);
#pragma unroll
              for (int q = 0; q < R; ++q) {
#pragma unroll
                for (int j = 0; j < 8; ++j) {
                  acc[q][i] = fmaf(w[u][q][j], xs[j], acc[q][i]);
                }
              }
            }
          }
        }
      }
    } else {
      for (int c = part * 32 + lane; c < p.cols; c += 32 * split) {
        float w[R];
#pragma unroll
        for (int q = 0; q < R; ++q) w[q] = Load(p.w, p.storage, row[q] + c);
#pragma unroll
        for (int i = 0; i < N; ++i) {
          const float x = __ldg(p.x + static_cast<int64_t>(i) * p.ldx + c);
#pragma unroll
          for (int q = 0; q < R; ++q) acc[q][i] = fmaf(w[q], x, acc[q][i]);
        }
      }
    }
#pragma unroll
    for (int q = 0; q < R; ++q) {
#pragma unroll
      for (int i = 0; i < N; ++i) {
        float v = acc[q][i];
        for (int o = 16; o > 0; o >>= 1) {
          v += __shfl_xor_sync(0xffffffffu, v, o);
        }
        acc[q][i] = v;
      }
    }
  }
  if (split > 1) {  // uniform over the block: every thread meets the barrier
    if (lane == 0) {
#pragma unroll
      for (int q = 0; q < R; ++q) {
#pragma unroll
        for (int i = 0; i < N; ++i) partial[warp][q][i] = acc[q][i];
      }
    }
    __syncthreads();
    if (part != 0) return;
#pragma unroll
    for (int q = 0; q < R; ++q) {
#pragma unroll
      for (int i = 0; i < N; ++i) {
        float v = partial[warp][q][i];
        for (int s = 1; s < split; ++s) v += partial[warp + s][q][i];
        acc[q][i] = v;
      }
    }
  }
  // Lane q * N + i writes row r0 + q of input i (static register indices
  // per unrolled branch).
#pragma unroll
  for (int q = 0; q < R; ++q) {
#pragma unroll
    for (int i = 0; i < N; ++i) {
      if (lane == q * N + i && r0 + q < p.rows) {
        const int r = r0 + q;
        float v = acc[q][i];
        if (p.bias != nullptr) v += p.bias[r];
        float* y = p.y + static_cast<int64_t>(i) * p.ldy + r;
        *y = p.accumulate ? *y + v : v;
      }
    }
  }
}

// Warps per row group: the fewest that reach kGemvTargetWarps, as long as
// each still has a full pass of 32 lanes x 8 columns to read.
int GemvSplit(int rows, int cols) {
  const int64_t groups = (rows + kGemvRowsPerWarp - 1) / kGemvRowsPerWarp;
  int split = 1;
  while (split < kGemvWarps && groups * split < kGemvTargetWarps &&
         cols >= 2 * 32 * 8 * split) {
    split *= 2;
  }
  return split;
}

template <int N>
void LaunchGemvN(const GemvParams& p, bool vector, cudaStream_t stream) {
  const int split = GemvSplit(p.rows, p.cols);
  const int rows_per_block = kGemvWarps / split * kGemvRowsPerWarp;
  const int blocks = (p.rows + rows_per_block - 1) / rows_per_block;
  if (vector) {
    SEQBOAT_LAUNCH(blocks, kGemvWarps * 32, 0, stream, GemvKernel<N, true>)
    (p, split);
  } else {
    SEQBOAT_LAUNCH(blocks, kGemvWarps * 32, 0, stream, GemvKernel<N, false>)
    (p, split);
  }
}

int ThreadsFor(int d) {
  // Enough warps to cover a row once when it is short, 256 otherwise.
  const int warps = (d + 31) / 32;
  return warps >= kThreads / 32 ? kThreads : (warps < 1 ? 32 : warps * 32);
}

}  // namespace

void LaunchEmbed(const EmbedParams& p, Storage storage, const int32_t* fed_map,
                 cudaStream_t stream) {
  if (p.n <= 0) return;
  SEQBOAT_LAUNCH(p.n, ThreadsFor(static_cast<int>(p.table.cols)), 0, stream,
                 EmbedKernel)
  (p, storage, fed_map);
}

void LaunchRmsNorm(const NormParams& p, cudaStream_t stream) {
  if (p.n <= 0) return;
  SEQBOAT_LAUNCH(p.n, ThreadsFor(p.d), 0, stream, RmsNormKernel)(p);
}

void LaunchLayerNorm(const NormParams& p, cudaStream_t stream) {
  if (p.n <= 0) return;
  SEQBOAT_LAUNCH(p.n, ThreadsFor(p.d), 0, stream, LayerNormKernel)(p);
}

void LaunchGatherRows(const GatherRowsParams& p, cudaStream_t stream) {
  if (p.m <= 0) return;
  SEQBOAT_LAUNCH(p.m, ThreadsFor(p.d), 0, stream, GatherRowsKernel)(p);
}

void LaunchConvertRows(const float* x, int ldx, int n, int d, void* out,
                       Storage storage, cudaStream_t stream) {
  if (n <= 0) return;
  SEQBOAT_LAUNCH(n, ThreadsFor(d), 0, stream, ConvertRowsKernel)
  (x, ldx, d, out, storage);
}

void LaunchGemv(const GemvParams& p, cudaStream_t stream) {
  if (p.n <= 0 || p.rows <= 0) return;
  const size_t elem = p.storage == Storage::kF32 ? 4 : 2;
  // 16-byte weight loads need every row start aligned: cols % 8 == 0 keeps
  // row starts 16-byte multiples apart (8 x 2 bytes, or 2 x 16 for fp32),
  // and x rows must allow the same column offsets as 4-byte loads (any ldx).
  const bool vector = p.cols % 8 == 0 &&
                      (reinterpret_cast<uintptr_t>(p.w) & 15) == 0 &&
                      (static_cast<size_t>(p.cols) * elem) % 16 == 0;
  switch (p.n) {
    case 1:
      return LaunchGemvN<1>(p, vector, stream);
    case 2:
      return LaunchGemvN<2>(p, vector, stream);
    case 3:
      return LaunchGemvN<3>(p, vector, stream);
    case 4:
      return LaunchGemvN<4>(p, vector, stream);
    case 5:
      return LaunchGemvN<5>(p, vector, stream);
    case 6:
      return LaunchGemvN<6>(p, vector, stream);
    case 7:
      return LaunchGemvN<7>(p, vector, stream);
    default:
      return LaunchGemvN<8>(p, vector, stream);
  }
}

void LaunchAddBias(const AddBiasParams& p, cudaStream_t stream) {
  if (p.n <= 0) return;
  SEQBOAT_LAUNCH(p.n, ThreadsFor(p.d), 0, stream, AddBiasKernel)(p);
}

void LaunchActivateMul(const ActivateMulParams& p, cudaStream_t stream) {
  if (p.n <= 0) return;
  SEQBOAT_LAUNCH(p.n, ThreadsFor(p.f), 0, stream, ActivateMulKernel)(p);
}

void LaunchScatterAddScaled(const ScatterAddParams& p, cudaStream_t stream) {
  // d == 0 would make an empty grid, which fails the launch.
  if (p.m <= 0 || p.d <= 0) return;
  SEQBOAT_LAUNCH((p.d + kThreads - 1) / kThreads, kThreads, 0, stream,
                 ScatterAddScaledKernel)
  (p);
}

void LaunchMoeRoute(const MoeRouteParams& p, cudaStream_t stream) {
  if (p.n <= 0) return;
  SEQBOAT_LAUNCH((p.n + 127) / 128, 128, 0, stream, MoeRouteKernel)(p);
}

}  // namespace seqboat::cuda
