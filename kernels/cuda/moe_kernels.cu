// The device-grouped expert kernels (moe_kernels.h).
#include "kernels/cuda/launch.cuh"
#include "kernels/cuda/moe_kernels.h"
#include "kernels/cuda/register_rows.cuh"
#include "kernels/cuda/stored_weights.cuh"

namespace seqboat::cuda {
namespace {

constexpr int kGroupThreads = 256;
constexpr int kGemmWarps = 8;
constexpr int kGemmRowsPerWarp = 4;
// A grid of fewer blocks than the SMs (132 on an H100/H200) takes one row a
// warp instead, four times the blocks: a decode step's top-1 expert is a
// tile or two, whose four rows a warp would be read one after another.
constexpr int kGemmSms = 132;
constexpr int kCombineThreads = 256;

// Shared: each expert's first pair and first tile (x + 1 each). A thread
// per expert counts and then places its pairs in row order, so the order
// is (expert, row, slot) however threads are scheduled.
__global__ void MoeGroupKernel(MoeGroupParams p) {
  JoinLaunchChain();
  SEQBOAT_DYNAMIC_SHARED(int, first);
  int* first_tile = first + p.x + 1;
  const int pairs = p.n * p.slots;
  for (int e = threadIdx.x; e < p.x; e += blockDim.x) {
    int c = 0;
    for (int i = 0; i < pairs; ++i) c += p.experts[i] == e;
    first[e + 1] = c;
  }
  __syncthreads();
  if (threadIdx.x == 0) {
    first[0] = 0;
    first_tile[0] = 0;
    for (int e = 0; e < p.x; ++e) {
      const int c = first[e + 1];
      first_tile[e + 1] = first_tile[e] + (c + kMoeTileRows - 1) / kMoeTileRows;
      first[e + 1] = first[e] + c;
    }
  }
  __syncthreads();
  for (int i = threadIdx.x; i < pairs; i += blockDim.x) {
    const int e = p.experts[i];
    if (e < 0 || e >= p.x) p.pair_of[i] = -1;
    if (i >= first[p.x]) {
      p.pair_row[i] = -1;
      p.pair_gate[i] = 0.0f;
    }
  }
  const int bound = MoeTileBound(p.n, p.slots, p.x);
  for (int t = first_tile[p.x] + threadIdx.x; t < bound; t += blockDim.x) {
    p.tiles[3 * t] = 0;
    p.tiles[3 * t + 1] = 0;
    p.tiles[3 * t + 2] = 0;
  }
  for (int e = threadIdx.x; e < p.x; e += blockDim.x) {
    int at = first[e];
    const int end = first[e + 1];
    for (int i = 0; i < pairs && at < end; ++i) {
      if (p.experts[i] != e) continue;
      p.pair_of[i] = at;
      p.pair_row[at] = i / p.slots;
      p.pair_gate[at] = p.gates[i];
      ++at;
    }
    int t = first_tile[e];
    for (int a = first[e]; a < end; a += kMoeTileRows, ++t) {
      p.tiles[3 * t] = e;
      p.tiles[3 * t + 1] = a;
      p.tiles[3 * t + 2] = end - a < kMoeTileRows ? end - a : kMoeTileRows;
    }
  }
}

// Block (tile, row block): each warp takes `rows_per_warp` output rows in
// turn; its lanes split the columns, 16 bytes of weights (kPer of them) a
// load where the rows are aligned for it, and each weight serves every pair
// of the tile, whose activations come 16 bytes a load where their rows are
// aligned. Sums meet in a fixed butterfly, so a pair's result is the same
// whichever tile, pairs or rows per warp it shares.
template <int kPer>
__global__ void MoeGemmKernel(MoeGemmParams p, Storage s, int rows_per_warp) {
  JoinLaunchChain();
  const int* tile = p.tiles + 3 * blockIdx.x;
  const int e = tile[0], at = tile[1], m = tile[2];
  if (m <= 0) return;
  __shared__ const float* xs[kMoeTileRows];
  if (static_cast<int>(threadIdx.x) < m) {
    const int r = p.x_rows != nullptr ? p.x_rows[at + threadIdx.x]
                                      : at + static_cast<int>(threadIdx.x);
    xs[threadIdx.x] = p.x + static_cast<int64_t>(r) * p.ldx;
  }
  __syncthreads();
  const Matrix w = p.experts[e];
  const int64_t rows = p.shape.rows, cols = p.shape.cols;
  const bool vector = cols % kPer == 0;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int64_t base =
      static_cast<int64_t>(blockIdx.y) * kGemmWarps * rows_per_warp;
  for (int k = 0; k < rows_per_warp; ++k) {
    const int64_t r = base + warp * rows_per_warp + k;
    if (r >= rows) break;
    float acc[kMoeTileRows];
#pragma unroll
    for (int j = 0; j < kMoeTileRows; ++j) acc[j] = 0.0f;
    const int64_t row = r * cols;
    if (vector) {
      for (int64_t c = static_cast<int64_t>(lane) * kPer; c < cols;
           c += 32 * kPer) {
        float wv[16];
        StoredWeights16(w.data, s, row + c, wv);
#pragma unroll
        for (int j = 0; j < kMoeTileRows; ++j) {
          if (j >= m) break;
          float xv[kPer];
          LoadRow(xv, xs[j] + c);
#pragma unroll
          for (int q = 0; q < kPer; ++q) acc[j] = fmaf(wv[q], xv[q], acc[j]);
        }
      }
    } else {
      for (int64_t c = lane; c < cols; c += 32) {
        const float wv = StoredWeight(w.data, s, row + c);
#pragma unroll
        for (int j = 0; j < kMoeTileRows; ++j) {
          if (j >= m) break;
          acc[j] = fmaf(wv, xs[j][c], acc[j]);
        }
      }
    }
    const float factor = Fp8RowFactor(w.data, s, rows, cols, r);
    const float b =
        p.bias != nullptr ? p.bias[static_cast<int64_t>(e) * rows + r] : 0.0f;
#pragma unroll
    for (int j = 0; j < kMoeTileRows; ++j) {
      float v = acc[j];
      for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
      if (lane == 0 && j < m) {
        p.y[static_cast<int64_t>(at + j) * p.ldy + r] = v * factor + b;
      }
    }
  }
}

// A block per row: its pairs in increasing order (shared), then a thread
// per column adds them in that order.
__global__ void MoeCombineKernel(MoeCombineParams p) {
  JoinLaunchChain();
  SEQBOAT_DYNAMIC_SHARED(int, mine);
  __shared__ int count;
  const int i = blockIdx.x;
  float* di = p.dst + static_cast<int64_t>(i) * p.lddst;
  if (p.pair_of == nullptr) {
    const float g = SharedExpertGate(p.scale, p.gate_logits[i]);
    const float* si = p.src + static_cast<int64_t>(i) * p.ldsrc;
    for (int k = threadIdx.x; k < p.d; k += blockDim.x) {
      di[k] = ScaledResidualAdd(di[k], g, si[k]);
    }
    return;
  }
  if (threadIdx.x == 0) {
    const int32_t* of = p.pair_of + static_cast<int64_t>(i) * p.slots;
    int c = 0;
    for (int j = 0; j < p.slots; ++j) {
      const int q = of[j];
      if (q < 0) continue;
      int at = c++;
      while (at > 0 && mine[at - 1] > q) {
        mine[at] = mine[at - 1];
        --at;
      }
      mine[at] = q;
    }
    count = c;
  }
  __syncthreads();
  for (int k = threadIdx.x; k < p.d; k += blockDim.x) {
    float v = di[k];
    for (int j = 0; j < count; ++j) {
      const int q = mine[j];
      v = ScaledResidualAdd(v, p.pair_gate[q],
                            p.src[static_cast<int64_t>(q) * p.ldsrc + k]);
    }
    di[k] = v;
  }
}

}  // namespace

void LaunchMoeGroup(const MoeGroupParams& p, LaunchQueue queue) {
  if (p.n <= 0 || p.slots <= 0 || p.x <= 0) return;
  SEQBOAT_LAUNCH_ON(1, kGroupThreads, 2 * (p.x + 1) * sizeof(int), queue,
                    MoeGroupKernel)
  (p);
}

int MoeGemmRowsPerWarp(int ntiles, int rows) {
  const int64_t blocks =
      int64_t{ntiles} * ((rows + kGemmWarps * kGemmRowsPerWarp - 1) /
                         (kGemmWarps * kGemmRowsPerWarp));
  return blocks < kGemmSms ? 1 : kGemmRowsPerWarp;
}

void LaunchMoeGemm(const MoeGemmParams& p, Storage storage, LaunchQueue queue) {
  if (p.ntiles <= 0 || p.shape.rows <= 0) return;
  const int rpw = MoeGemmRowsPerWarp(p.ntiles, p.shape.rows);
  const int per_block = kGemmWarps * rpw;
  const dim3 grid(p.ntiles, static_cast<unsigned>(
                                (p.shape.rows + per_block - 1) / per_block));
  switch (WeightsPer16Bytes(storage)) {
    case 4:
      SEQBOAT_LAUNCH_ON(grid, kGemmWarps * 32, 0, queue, MoeGemmKernel<4>)
      (p, storage, rpw);
      return;
    case 8:
      SEQBOAT_LAUNCH_ON(grid, kGemmWarps * 32, 0, queue, MoeGemmKernel<8>)
      (p, storage, rpw);
      return;
    default:
      SEQBOAT_LAUNCH_ON(grid, kGemmWarps * 32, 0, queue, MoeGemmKernel<16>)
      (p, storage, rpw);
      return;
  }
}

void LaunchMoeCombine(const MoeCombineParams& p, LaunchQueue queue) {
  if (p.n <= 0 || p.d <= 0) return;
  const int threads =
      p.d < kCombineThreads ? (p.d + 31) / 32 * 32 : kCombineThreads;
  SEQBOAT_LAUNCH_ON(p.n, threads, p.slots * sizeof(int), queue,
                    MoeCombineKernel)
  (p);
}

}  // namespace seqboat::cuda
