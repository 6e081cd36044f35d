// Mamba-2 kernels. A head's state is [head_dim, n_state]; rows (one channel p
// each) are independent and tokens are sequential. A warp owns kRowsPerWarp
// rows of one head for a whole segment, each row's n_state entries spread
// over the lanes (lane l holds entries l, l + 32, ...), so the state stays in
// registers across the tokens, B and C of the token are loaded once per warp
// for all its rows, and C · h is a warp reduction. Blocks of kWarps warps
// cover kRowsPerBlock rows of one head; blockIdx.y picks the segment.
#include <stdint.h>

#include "engine/backend/mamba2_math.h"
#include "engine/backend/op_math.h"
#include "kernels/cuda/launch.cuh"
#include "kernels/cuda/mamba2_kernels.h"

namespace seqboat::cuda {
namespace {

constexpr int kWarps = 4;
constexpr int kRowsPerWarp = 4;
constexpr int kRowsPerBlock = kWarps * kRowsPerWarp;
constexpr int kScanThreads = kWarps * 32;
constexpr int kMaxGridY = 65535;
constexpr unsigned kFullMask = 0xffffffffu;

__device__ __forceinline__ float WarpSum(float v) {
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(kFullMask, v, o);
  return v;
}

// Where a warp's rows are: its head, its first channel and how many of its
// rows exist (0 when head_dim leaves the warp without any).
struct WarpRows {
  int head;
  int p0;
  int rows;
};

__device__ __forceinline__ WarpRows RowsOfWarp(const Mamba2ScanParams& p) {
  const int blocks_per_head = (p.head_dim + kRowsPerBlock - 1) / kRowsPerBlock;
  WarpRows w;
  w.head = blockIdx.x / blocks_per_head;
  w.p0 = (blockIdx.x % blocks_per_head) * kRowsPerBlock +
         (threadIdx.x / 32) * kRowsPerWarp;
  const int left = p.head_dim - w.p0;
  w.rows = left < 0 ? 0 : (left < kRowsPerWarp ? left : kRowsPerWarp);
  return w;
}

// R = entries per lane (n_state <= 32 R). Lanes past n_state hold zeros in
// h, B and C, which the update keeps at zero and the reduction ignores.
template <int R>
__global__ void __launch_bounds__(kScanThreads)
    Mamba2ScanRegKernel(Mamba2ScanParams p) {
  const WarpRows w = RowsOfWarp(p);
  // Whole warps leave together, so the shuffles below always see 32 lanes.
  if (w.rows == 0) return;
  const int lane = threadIdx.x & 31;
  const int n = p.n_state, h = w.head;
  const int64_t group =
      static_cast<int64_t>(op_math::Mamba2Group(h, p.heads, p.groups)) * n;
  const float a = p.a[h], dt_bias = p.dt_bias[h], d = p.d[h];
  const int64_t channel0 = static_cast<int64_t>(h) * p.head_dim + w.p0;
  for (int s = blockIdx.y; s < p.nsegs; s += gridDim.y) {
    const Segment seg = p.segs[s];
    // Padding segments may share a real segment's slot: no state access.
    if (seg.len <= 0) continue;
    float* state = p.state + seg.slot * p.state_stride + channel0 * n;
    float st[kRowsPerWarp][R];
#pragma unroll
    for (int r = 0; r < kRowsPerWarp; ++r) {
#pragma unroll
      for (int j = 0; j < R; ++j) {
        const int i = lane + 32 * j;
        st[r][j] = r < w.rows && i < n ? state[r * n + i] : 0.0f;
      }
    }
    const int64_t end = static_cast<int64_t>(seg.start) + seg.len;
    for (int64_t t = seg.start; t < end; ++t) {
      const float delta = op_math::Mamba2Delta(p.dt[t * p.lddt + h], dt_bias,
                                               p.dt_min, p.dt_max);
      const float decay = op_math::Mamba2Decay(delta, a);
      const float* brow = p.b + t * p.ldxbc + group;
      const float* crow = p.c + t * p.ldxbc + group;
      float bv[R], cv[R];
#pragma unroll
      for (int j = 0; j < R; ++j) {
        const int i = lane + 32 * j;
        bv[j] = i < n ? brow[i] : 0.0f;
        cv[j] = i < n ? crow[i] : 0.0f;
      }
      const float* x = p.x + t * p.ldxbc + channel0;
      float* out = p.out + t * p.ldo + channel0;
#pragma unroll
      for (int r = 0; r < kRowsPerWarp; ++r) {
        if (r >= w.rows) break;  // the same for every lane of the warp
        const float xv = x[r];
        const float dx = delta * xv;
        float acc = 0.0f;
#pragma unroll
        for (int j = 0; j < R; ++j) {
          st[r][j] = op_math::Mamba2StateEntry(st[r][j], decay, dx, bv[j]);
          acc += cv[j] * st[r][j];
        }
        acc = WarpSum(acc);
        if (lane == 0) out[r] = acc + d * xv;
      }
    }
#pragma unroll
    for (int r = 0; r < kRowsPerWarp; ++r) {
#pragma unroll
      for (int j = 0; j < R; ++j) {
        const int i = lane + 32 * j;
        if (r < w.rows && i < n) state[r * n + i] = st[r][j];
      }
    }
  }
}

// Any n_state: the state is updated in place in global memory.
__global__ void __launch_bounds__(kScanThreads)
    Mamba2ScanGlobalKernel(Mamba2ScanParams p) {
  const WarpRows w = RowsOfWarp(p);
  if (w.rows == 0) return;
  const int lane = threadIdx.x & 31;
  const int n = p.n_state, h = w.head;
  const int64_t group =
      static_cast<int64_t>(op_math::Mamba2Group(h, p.heads, p.groups)) * n;
  const float a = p.a[h], dt_bias = p.dt_bias[h], d = p.d[h];
  const int64_t channel0 = static_cast<int64_t>(h) * p.head_dim + w.p0;
  for (int s = blockIdx.y; s < p.nsegs; s += gridDim.y) {
    const Segment seg = p.segs[s];
    if (seg.len <= 0) continue;
    float* state = p.state + seg.slot * p.state_stride + channel0 * n;
    const int64_t end = static_cast<int64_t>(seg.start) + seg.len;
    for (int64_t t = seg.start; t < end; ++t) {
      const float delta = op_math::Mamba2Delta(p.dt[t * p.lddt + h], dt_bias,
                                               p.dt_min, p.dt_max);
      const float decay = op_math::Mamba2Decay(delta, a);
      const float* brow = p.b + t * p.ldxbc + group;
      const float* crow = p.c + t * p.ldxbc + group;
      const float* x = p.x + t * p.ldxbc + channel0;
      float* out = p.out + t * p.ldo + channel0;
      for (int r = 0; r < w.rows; ++r) {
        const float xv = x[r];
        const float dx = delta * xv;
        float* row = state + static_cast<int64_t>(r) * n;
        float acc = 0.0f;
        for (int i = lane; i < n; i += 32) {
          row[i] = op_math::Mamba2StateEntry(row[i], decay, dx, brow[i]);
          acc += crow[i] * row[i];
        }
        acc = WarpSum(acc);
        if (lane == 0) out[r] = acc + d * xv;
      }
    }
  }
}

// --- gated norm
// ----------------------------------------------------------------

constexpr int kNormThreads = 256;

// Sum over the block; every thread gets the result.
__device__ float BlockSum(float v) {
  __shared__ float partial[32];
  v = WarpSum(v);
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  __syncthreads();  // partial[] may still be read by a previous call
  if (lane == 0) partial[warp] = v;
  __syncthreads();
  const int warps = (blockDim.x + 31) >> 5;
  v = lane < warps ? partial[lane] : 0.0f;
  return WarpSum(v);
}

// Block (row, group). Each thread rereads its own columns in the second pass
// and writes only them, so out may alias y.
__global__ void __launch_bounds__(kNormThreads)
    GatedRmsNormKernel(GatedRmsNormParams p) {
  const int gs = p.d / p.groups;
  const int64_t lo = static_cast<int64_t>(blockIdx.y) * gs;
  const float* y = p.y + static_cast<int64_t>(blockIdx.x) * p.ldy + lo;
  const float* z = p.z + static_cast<int64_t>(blockIdx.x) * p.ldz + lo;
  const float* wg = p.w + lo;
  float* out = p.out + static_cast<int64_t>(blockIdx.x) * p.ldo + lo;
  float sq = 0.0f;
  for (int j = threadIdx.x; j < gs; j += blockDim.x) {
    const float v = op_math::GatedValue(y[j], z[j]);
    sq += v * v;
  }
  const float scale = op_math::RmsScale(BlockSum(sq), gs, p.eps);
  for (int j = threadIdx.x; j < gs; j += blockDim.x) {
    out[j] = op_math::GatedValue(y[j], z[j]) * scale * wg[j];
  }
}

}  // namespace

void LaunchMamba2Scan(const Mamba2ScanParams& p, cudaStream_t stream) {
  if (p.nsegs <= 0 || p.heads <= 0 || p.head_dim <= 0 || p.n_state <= 0) {
    return;
  }
  const int blocks_per_head = (p.head_dim + kRowsPerBlock - 1) / kRowsPerBlock;
  const dim3 grid(p.heads * blocks_per_head,
                  p.nsegs < kMaxGridY ? p.nsegs : kMaxGridY);
  const int per_lane = (p.n_state + 31) / 32;
  if (per_lane <= 1) {
    SEQBOAT_LAUNCH(grid, kScanThreads, 0, stream, Mamba2ScanRegKernel<1>)(p);
  } else if (per_lane <= 2) {
    SEQBOAT_LAUNCH(grid, kScanThreads, 0, stream, Mamba2ScanRegKernel<2>)(p);
  } else if (per_lane <= 4) {
    SEQBOAT_LAUNCH(grid, kScanThreads, 0, stream, Mamba2ScanRegKernel<4>)(p);
  } else if (per_lane <= 8) {
    SEQBOAT_LAUNCH(grid, kScanThreads, 0, stream, Mamba2ScanRegKernel<8>)(p);
  } else {
    SEQBOAT_LAUNCH(grid, kScanThreads, 0, stream, Mamba2ScanGlobalKernel)(p);
  }
}

void LaunchGatedRmsNorm(const GatedRmsNormParams& p, cudaStream_t stream) {
  if (p.n <= 0 || p.d <= 0 || p.groups <= 0) return;
  const int gs = p.d / p.groups;
  const int warps = (gs + 31) / 32;
  const int threads = warps >= kNormThreads / 32 ? kNormThreads : warps * 32;
  SEQBOAT_LAUNCH(dim3(p.n, p.groups), threads, 0, stream, GatedRmsNormKernel)
  (p);
}

}  // namespace seqboat::cuda
