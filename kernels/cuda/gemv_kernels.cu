// The small-batch GEMV (gemv_kernels.h): warps over output rows, lanes over
// columns, 16 bytes of weights a load, every input row of the batch served
// by each weight loaded.
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <algorithm>

#include "kernels/cuda/conv_epilogue.cuh"
#include "kernels/cuda/fp8.cuh"
#include "kernels/cuda/gemv_kernels.h"
#include "kernels/cuda/launch.cuh"
#include "kernels/cuda/norm_rows.cuh"

namespace seqboat::cuda {
namespace {

constexpr int kGemvWarps = 8;  // warps per block
// Output rows per warp: each activation loaded serves this many weight rows,
// since L1 traffic for the activations (fp32, re-read for every row group)
// would otherwise exceed the weights' own. Batches over 8 take 2, so that a
// lane still writes each output (rows x n <= 32).
constexpr int kGemvRowsPerWarp = 4;
// Enough warps in flight to keep every multiprocessor's loads queued (16 per
// SM on a 132-SM H100/H200).
constexpr int kGemvTargetWarps = 132 * 16;
constexpr int kGemvMaxColumnSplits = 32;
// Blocks below which a narrow matrix takes one row a warp (the SMs of an
// H100 / H200).
constexpr int kGemvSms = 132;

// One weight, unscaled: fp8 codes come back divided by 256 (Fp8Over256).
__device__ __forceinline__ float LoadRaw(const void* p, Storage s, int64_t i) {
  switch (s) {
    case Storage::kBf16:
      return __bfloat162float(static_cast<const __nv_bfloat16*>(p)[i]);
    case Storage::kF16:
      return __half2float(static_cast<const __half*>(p)[i]);
    case Storage::kFp8E4m3:
      return Fp8Over256(static_cast<const uint8_t*>(p)[i]);
    default:
      return static_cast<const float*>(p)[i];
  }
}

// C consecutive weights of one row as floats from 16-byte loads: 8 from one
// (bf16/fp16) or two (fp32) loads, 16 fp8 codes from one. `at` is a
// multiple of C.
template <int C>
__device__ __forceinline__ void LoadW(const void* w, Storage s, int64_t at,
                                      float (&out)[C]) {
  if constexpr (C == 16) {  // fp8
    const uint4 raw = __ldg(
        reinterpret_cast<const uint4*>(static_cast<const uint8_t*>(w) + at));
    const uint32_t words[4] = {raw.x, raw.y, raw.z, raw.w};
#pragma unroll
    for (int i = 0; i < 4; ++i) {
#pragma unroll
      for (int b = 0; b < 4; ++b)
        out[4 * i + b] = Fp8Over256(words[i] >> (8 * b));
    }
  } else {
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
        out[2 * i + 1] = __half2float(
            __ushort_as_half(static_cast<unsigned short>(u >> 16)));
      }
    }
  }
}

// C consecutive activations, as 16-byte loads when `vector` (the caller
// checked alignment) and one at a time otherwise.
template <int C>
__device__ __forceinline__ void LoadX(const float* x, bool vector,
                                      float (&out)[C]) {
  if (vector) {
#pragma unroll
    for (int k = 0; k < C / 4; ++k) {
      const float4 a = __ldg(reinterpret_cast<const float4*>(x) + k);
      out[4 * k] = a.x, out[4 * k + 1] = a.y, out[4 * k + 2] = a.z,
              out[4 * k + 3] = a.w;
    }
    return;
  }
#pragma unroll
  for (int j = 0; j < C; ++j) out[j] = __ldg(x + j);
}

// What multiplies row r's finished sum: fp8's row scale (times the 256
// that Fp8Over256 left out), 1 otherwise.
__device__ __forceinline__ float RowFactor(const GemvParams& p, int r) {
  if (p.storage != Storage::kFp8E4m3) return 1.0f;
  return Fp8RowScales(p.w, p.rows, p.cols)[r] * 256.0f;
}

// The output of row r, input i: the finished sum scaled, biased and stored,
// or added to y at the residual scale with ScatterAddScaled's one fma (y + v
// exactly at scale 1), so fused and unfused adds give the same bits; then a
// folded conv's step for it (conv_epilogue.cuh).
__device__ __forceinline__ void Finish(const GemvParams& p, int i, int r,
                                       float sum) {
  float v = sum * RowFactor(p, r);
  if (p.bias != nullptr) v += p.bias[r];
  float* y = p.y + static_cast<int64_t>(i) * p.ldy + r;
  if (p.accumulate) v = ScaledResidualAdd(*y, p.residual_scale, v);
  *y = v;
  if (p.conv.e > 0) ConvEpilogue(p.conv, i, r, v);
}

// The folded pre-norm (GemvParams::norm) as a warp applies it: the
// statistics of each input row, reduced by the whole block before its warps
// start, and whether this warp also stores the normalised activations.
template <int N>
struct FoldedNorm {
  NormKind kind = NormKind::kNone;
  float scale[N];
  float mean[N];
  bool writer = false;
};

// Normalises C activations of input i from column c on in place, exactly as
// the norm kernel would have written them (norm_rows.cuh), and stores them
// in p.norm.out when this warp is the writer.
template <int N, int C>
__device__ __forceinline__ void Normalize(const GemvParams& p,
                                          const FoldedNorm<N>& fn, int i, int c,
                                          float (&xs)[C]) {
  const float *w = p.norm.w, *b = p.norm.b;
#pragma unroll
  for (int j = 0; j < C; ++j) {
    xs[j] = NormedValue(fn.kind, xs[j], fn.scale[i], fn.mean[i], w != nullptr,
                        w != nullptr ? __ldg(w + c + j) : 0.0f, b != nullptr,
                        b != nullptr ? __ldg(b + c + j) : 0.0f);
  }
  if (fn.writer) {
    float* out = p.norm.out + static_cast<int64_t>(i) * p.norm.ldo + c;
#pragma unroll
    for (int j = 0; j < C; ++j) out[j] = xs[j];
  }
}

// The vector path's sums: a lane's columns from c_first on, `stride` apart,
// C at a time, the weights of U passes loaded before their products.
template <int N, int R, int C>
__device__ __forceinline__ void SumVector(const GemvParams& p,
                                          const int64_t (&row)[R], int c_first,
                                          int c_end, int stride,
                                          const FoldedNorm<N>& fn,
                                          float (&acc)[R][N]) {
  constexpr int U = C == 16 ? 1 : 2;  // passes whose loads are issued first
  // x rows whose every C-column group is 16-byte aligned are read 16 bytes at
  // a time: 4-byte loads 32 or 64 bytes apart across a warp cost L1 that
  // many times the wavefronts (seen on an H200).
  const bool x_vector =
      (reinterpret_cast<uintptr_t>(p.x) & 15) == 0 && (p.ldx & 3) == 0;
  for (int c = c_first; c < c_end; c += U * stride) {
    float w[U][R][C];
#pragma unroll
    for (int u = 0; u < U; ++u) {
      if (c + u * stride < c_end) {
#pragma unroll
        for (int q = 0; q < R; ++q) {
          LoadW<C>(p.w, p.storage, row[q] + c + u * stride, w[u][q]);
        }
      }
    }
#pragma unroll
    for (int u = 0; u < U; ++u) {
      const int at = c + u * stride;
      if (at < c_end) {
#pragma unroll
        for (int i = 0; i < N; ++i) {
          float xs[C];
          LoadX<C>(p.x + static_cast<int64_t>(i) * p.ldx + at, x_vector, xs);
          if (fn.kind != NormKind::kNone) Normalize<N, C>(p, fn, i, at, xs);
#pragma unroll
          for (int q = 0; q < R; ++q) {
#pragma unroll
            for (int j = 0; j < C; ++j) {
              acc[q][i] = fmaf(w[u][q][j], xs[j], acc[q][i]);
            }
          }
        }
      }
    }
  }
}

// The scalar path's sums: one column at a time, `step` apart.
template <int N, int R>
__device__ __forceinline__ void SumScalar(const GemvParams& p,
                                          const int64_t (&row)[R], int c_first,
                                          int c_end, int step,
                                          const FoldedNorm<N>& fn,
                                          float (&acc)[R][N]) {
  for (int c = c_first; c < c_end; c += step) {
    float w[R];
#pragma unroll
    for (int q = 0; q < R; ++q) w[q] = LoadRaw(p.w, p.storage, row[q] + c);
#pragma unroll
    for (int i = 0; i < N; ++i) {
      float x[1] = {__ldg(p.x + static_cast<int64_t>(i) * p.ldx + c)};
      if (fn.kind != NormKind::kNone) Normalize<N, 1>(p, fn, i, c, x);
#pragma unroll
      for (int q = 0; q < R; ++q) acc[q][i] = fmaf(w[q], x[0], acc[q][i]);
    }
  }
}

// A warp computes R consecutive output rows over the columns of its block's
// chunk (blockIdx.y of `chunk` columns), or its share of them when `split`
// (1, 2, 4 or 8) warps divide them: its lanes stride over the columns C at
// a time, each lane keeping R x N partial sums; a butterfly reduction
// finishes a warp, and the split warps' sums are added in warp order
// through shared memory. One chunk: the result is written; several: the
// chunk's sum goes to p.partials for GemvReduceKernel. Each sum's order
// depends on the lane's columns, split and chunk only, never on n or R. The
// vector path needs cols % C == 0 and 16-byte aligned rows (checked on the
// host).
//
// A folded pre-norm first has every block reduce the N input rows itself
// (N x cols floats, mostly from L2: an eighth of what its warps then read
// for the products), with the norm kernel's very arithmetic, so that the
// products see the same floats as after a separate norm launch and the
// result is bit for bit the unfused one's. The warps of block row 0 that
// own output row 0 read every column once between them and store the
// normalised rows.
template <int N, int R, int C, bool kVector>
__global__ void __launch_bounds__(kGemvWarps * 32)
    GemvKernel(GemvParams p, int split, int chunk) {
  static_assert(R * N <= 32, "a lane writes each output");
  __shared__ float partial[kGemvWarps][R][N];
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int r0 = (blockIdx.x * (kGemvWarps / split) + warp / split) * R;
  const int part = warp % split;
  const int c_begin = blockIdx.y * chunk;
  const int c_end = min(p.cols, c_begin + chunk);
  if constexpr (kVector) {
    // Launched early, the block may run beside the kernel before, and reads
    // nothing but weights until it waits: the first warp of each row group
    // has lane q stream row r0 + q's chunk into L2. Vector rows start
    // 16-byte aligned and chunks are whole loads, so the sizes are
    // multiples of 16.
    if (p.early && part == 0 && lane < R && r0 + lane < p.rows) {
      const int64_t bytes = WeightBytes(p.storage);
      PrefetchL2(
          static_cast<const char*>(p.w) +
              (static_cast<int64_t>(r0 + lane) * p.cols + c_begin) * bytes,
          static_cast<uint32_t>((c_end - c_begin) * bytes));
    }
  }
  WaitForPriorGrids();
  LetDependentsLaunch();
  FoldedNorm<N> fn;
  if (p.norm.kind != NormKind::kNone) {  // uniform: all threads reduce
    fn.kind = p.norm.kind;
    RowNormStats<N>(fn.kind, p.x, p.ldx, p.cols, p.norm.eps, fn.scale, fn.mean);
    fn.writer = blockIdx.x == 0 && warp / split == 0;
  }
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
      SumVector<N, R, C>(p, row, c_begin + (part * 32 + lane) * C, c_end,
                         32 * C * split, fn, acc);
    } else {
      SumScalar<N, R>(p, row, c_begin + part * 32 + lane, c_end, 32 * split, fn,
                      acc);
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
        if (gridDim.y == 1) {
          Finish(p, i, r, acc[q][i]);
        } else {
          p.partials[(static_cast<int64_t>(blockIdx.y) * p.n + i) * p.rows +
                     r] = acc[q][i];
        }
      }
    }
  }
}

// Adds the column splits' partial sums of each output in split order.
__global__ void GemvReduceKernel(GemvParams p, int splits) {
  const int64_t at =
      static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  const int64_t outputs = static_cast<int64_t>(p.n) * p.rows;
  WaitForPriorGrids();
  LetDependentsLaunch();
  if (at >= outputs) return;
  float v = 0.0f;
  for (int s = 0; s < splits; ++s) v += p.partials[s * outputs + at];
  Finish(p, static_cast<int>(at / p.rows), static_cast<int>(at % p.rows), v);
}

// Warps per row group (of `rpw` rows): the fewest that reach
// kGemvTargetWarps, as long as each still has two passes of 32 lanes x 8
// columns to read.
int WarpSplit(int rows, int cols, int rpw) {
  const int64_t groups = (rows + rpw - 1) / rpw;
  int split = 1;
  while (split < kGemvWarps && groups * split < kGemvTargetWarps &&
         cols >= 2 * 32 * 8 * split) {
    split *= 2;
  }
  return split;
}

// Columns per block: all of them, or, where the row groups' warps are still
// short of kGemvTargetWarps, chunks of whole passes of the split warps (a
// pass: 32 lanes x the columns of one 16-byte weight load), at least one
// pass each.
int ChunkColumns(int rows, int cols, Storage storage, int rpw) {
  const int split = WarpSplit(rows, cols, rpw);
  const int64_t warps = (rows + rpw - 1) / rpw * int64_t{split};
  const int pass = 32 * (storage == Storage::kFp8E4m3 ? 16 : 8) * split;
  int64_t want = (kGemvTargetWarps + warps - 1) / warps;
  want = std::min<int64_t>(want, std::min(kGemvMaxColumnSplits, cols / pass));
  if (want <= 1) return cols;
  const int64_t per = (cols + want - 1) / want;
  return static_cast<int>((per + pass - 1) / pass * pass);
}

// Output rows per warp that the split is planned for: kGemvRowsPerWarp, or
// 1 where at kGemvRowsPerWarp the grid would leave multiprocessors without a
// block. Column chunks are whole passes, so a narrow matrix (Mamba-1.4B's
// x_proj, 160 x 4096: 40 blocks of fp8 or 80 of bf16 at 4 rows a warp)
// runs out of chunks before it fills the device; one row a warp gives it 4x
// the warps (160 / 320 blocks) at the price of reloading each activation
// for every row (from L1). A function of the shape and storage, like the
// split and chunks it sets, so that the sums' order never depends on n.
int PlannedRowsPerWarp(int rows, int cols, Storage storage) {
  const int rpw = kGemvRowsPerWarp;
  const int split = WarpSplit(rows, cols, rpw);
  const int chunk = ChunkColumns(rows, cols, storage, rpw);
  const int64_t rows_per_block = kGemvWarps / split * rpw;
  const int64_t blocks = (rows + rows_per_block - 1) / rows_per_block *
                         ((cols + chunk - 1) / chunk);
  return blocks < kGemvSms ? 1 : rpw;
}

// The launch geometry of a batch of n: the planned split and chunks; rows
// per warp R from the kernel instance (4 up to 8 inputs, 2 beyond, or 1
// where planned on the vector path). R only decides which warp computes
// which row, never an order of summation, so the scalar path, which keeps
// 4 / 2, gives the same bits as the plan with fewer blocks.
struct Geometry {
  int split, chunk;
  dim3 grid;
};

Geometry GeometryFor(const GemvParams& p, int r) {
  const int rpw = PlannedRowsPerWarp(p.rows, p.cols, p.storage);
  Geometry g;
  g.split = WarpSplit(p.rows, p.cols, rpw);
  g.chunk = ChunkColumns(p.rows, p.cols, p.storage, rpw);
  const int rows_per_block = kGemvWarps / g.split * r;
  g.grid = dim3((p.rows + rows_per_block - 1) / rows_per_block,
                (p.cols + g.chunk - 1) / g.chunk);
  return g;
}

// R where the batch takes kernel instance N on the vector path or not.
template <int N>
int RowsPerWarpOf(const GemvParams& p, bool vector) {
  if (vector && PlannedRowsPerWarp(p.rows, p.cols, p.storage) == 1) return 1;
  return N <= 8 ? kGemvRowsPerWarp : 2;
}

template <int N, int R>
void LaunchGemvNR(const GemvParams& p, bool vector, const Geometry& g,
                  cudaStream_t stream) {
  const bool fp8 = p.storage == Storage::kFp8E4m3;
  if (vector && fp8) {
    SEQBOAT_LAUNCH_EARLY(g.grid, kGemvWarps * 32, 0, stream, p.early,
                         GemvKernel<N, R, 16, true>)
    (p, g.split, g.chunk);
  } else if (vector) {
    SEQBOAT_LAUNCH_EARLY(g.grid, kGemvWarps * 32, 0, stream, p.early,
                         GemvKernel<N, R, 8, true>)
    (p, g.split, g.chunk);
  } else if constexpr (R != 1) {  // the scalar path has no R = 1 instance
    SEQBOAT_LAUNCH_EARLY(g.grid, kGemvWarps * 32, 0, stream, p.early,
                         GemvKernel<N, R, 8, false>)
    (p, g.split, g.chunk);
  }
}

template <int N>
void LaunchGemvN(const GemvParams& p, bool vector, cudaStream_t stream) {
  constexpr int kR = N <= 8 ? kGemvRowsPerWarp : 2;
  const int r = RowsPerWarpOf<N>(p, vector);
  const Geometry g = GeometryFor(p, r);
  if (r == 1) {
    LaunchGemvNR<N, 1>(p, vector, g, stream);
  } else {
    LaunchGemvNR<N, kR>(p, vector, g, stream);
  }
  if (g.grid.y > 1) {
    const int64_t outputs = static_cast<int64_t>(p.n) * p.rows;
    SEQBOAT_LAUNCH_EARLY(static_cast<unsigned>((outputs + 255) / 256), 256, 0,
                         stream, p.early, GemvReduceKernel)
    (p, static_cast<int>(g.grid.y));
  }
}

bool VectorPath(const GemvParams& p) {
  // 16-byte weight loads need every row start aligned: cols a multiple of
  // the columns one load holds (8, or 16 fp8 codes) keeps row starts
  // 16-byte multiples apart (2 x 16 for fp32), and x rows must allow the
  // same column offsets as 4-byte loads (any ldx).
  const int per_load = p.storage == Storage::kFp8E4m3 ? 16 : 8;
  return p.cols % per_load == 0 && (reinterpret_cast<uintptr_t>(p.w) & 15) == 0;
}

}  // namespace

int GemvColumnSplits(int rows, int cols, Storage storage) {
  if (rows <= 0 || cols <= 0) return 1;
  const int chunk = ChunkColumns(rows, cols, storage,
                                 PlannedRowsPerWarp(rows, cols, storage));
  return (cols + chunk - 1) / chunk;
}

int64_t GemvBlocks(const GemvParams& p) {
  if (p.n <= 0 || p.rows <= 0) return 0;
  const int n = std::min(p.n, kGemvMaxRows);
  const bool vector = VectorPath(p);
  int r = n <= 8 ? kGemvRowsPerWarp : 2;
  if (vector && PlannedRowsPerWarp(p.rows, p.cols, p.storage) == 1) r = 1;
  const dim3 grid = GeometryFor(p, r).grid;
  return int64_t{grid.x} * grid.y;
}

int64_t GemvPartialFloats(const GemvParams& p) {
  const int splits = GemvColumnSplits(p.rows, p.cols, p.storage);
  return splits > 1 ? int64_t{splits} * p.n * p.rows : 0;
}

void LaunchGemv(const GemvParams& p, cudaStream_t stream) {
  if (p.n <= 0 || p.rows <= 0) return;
  const bool vector = VectorPath(p);
  switch (p.n) {
#define SEQBOAT_GEMV_CASE(n) \
  case n:                    \
    return LaunchGemvN<n>(p, vector, stream);
    SEQBOAT_GEMV_CASE(1)
    SEQBOAT_GEMV_CASE(2)
    SEQBOAT_GEMV_CASE(3)
    SEQBOAT_GEMV_CASE(4)
    SEQBOAT_GEMV_CASE(5)
    SEQBOAT_GEMV_CASE(6)
    SEQBOAT_GEMV_CASE(7)
    SEQBOAT_GEMV_CASE(8)
    SEQBOAT_GEMV_CASE(9)
    SEQBOAT_GEMV_CASE(10)
    SEQBOAT_GEMV_CASE(11)
    SEQBOAT_GEMV_CASE(12)
    SEQBOAT_GEMV_CASE(13)
    SEQBOAT_GEMV_CASE(14)
    SEQBOAT_GEMV_CASE(15)
#undef SEQBOAT_GEMV_CASE
    default:
      return LaunchGemvN<16>(p, vector, stream);
  }
}

}  // namespace seqboat::cuda
