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
#include "kernels/cuda/half_rows.cuh"
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
  JoinLaunchChain();
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
  JoinLaunchChain();
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
  JoinLaunchChain();
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
    const float v = op_math::GatedValue(y[j], z[j]) * scale * wg[j];
    out[j] = v;
    StoreHalf(p.out16, blockIdx.x, lo + j, v);
  }
}

// --- fused decode step ---------------------------------------------------
//
// A decode call's conv over xBC, scan and gate in one kernel (Mamba2StepKernel)
// and the norm in a second (Mamba2StepNormKernel). Two, not one: the norm's
// RMS spans every head of a group, which a head's block cannot see, and every
// head of a group reads the B and C columns' conv windows, so those move on
// only once all heads have read them (in the second kernel). A block covers
// the rows of a head that Mamba2ScanRegKernel's does and sums in the same
// order, and the second kernel's sums are GatedRmsNormKernel's, so the
// outputs equal the three kernels' bit for bit.

constexpr int kStepTaps = 4;           // d_conv; other widths take three ops
constexpr int kMaxStepState = 8 * 32;  // n_state, as Mamba2ScanRegKernel<8>

// SiLU(conv) of channel `ch` at token t of `seg`, from the window as it was
// before the segment (not moved here) and the segment's earlier inputs.
__device__ __forceinline__ float ConvAt(const MambaConvParams& p,
                                        const Segment& seg, int64_t t, int ch) {
  const float* window = p.state + seg.slot * p.state_stride +
                        static_cast<int64_t>(ch) * (kStepTaps - 1);
  float win[kStepTaps - 1], w[kStepTaps];
#pragma unroll
  for (int i = 0; i < kStepTaps - 1; ++i) {
    const int64_t pos = t - (kStepTaps - 1) + i;
    win[i] = pos >= seg.start ? p.x[pos * p.ldx + ch]
                              : window[pos - seg.start + (kStepTaps - 1)];
  }
#pragma unroll
  for (int i = 0; i < kStepTaps; ++i) {
    w[i] = p.w[static_cast<int64_t>(ch) * kStepTaps + i];
  }
  const float bias = p.bias != nullptr ? p.bias[ch] : 0.0f;
  return op_math::ConvStep(win, w, bias, p.x[t * p.ldx + ch], kStepTaps);
}

// Channel ch's window after `seg`: its last inputs, oldest first. Read whole
// before it is written.
__device__ __forceinline__ void MoveWindow(const MambaConvParams& p,
                                           const Segment& seg, int ch) {
  float* window = p.state + seg.slot * p.state_stride +
                  static_cast<int64_t>(ch) * (kStepTaps - 1);
  const int64_t end = static_cast<int64_t>(seg.start) + seg.len;
  float next[kStepTaps - 1];
#pragma unroll
  for (int i = 0; i < kStepTaps - 1; ++i) {
    const int64_t pos = end - (kStepTaps - 1) + i;
    next[i] = pos >= seg.start ? p.x[pos * p.ldx + ch]
                               : window[pos - seg.start + (kStepTaps - 1)];
  }
#pragma unroll
  for (int i = 0; i < kStepTaps - 1; ++i) window[i] = next[i];
}

// Block (rows of a head, segment), as Mamba2ScanRegKernel<R>. Per token, the
// block's threads first convolve its x channels and the group's B and C into
// shared memory, then each warp steps its rows and writes the gated value
// v = y SiLU(z) into scan.out for the norm. Warps without rows stay for the
// barriers.
template <int R>
__global__ void __launch_bounds__(kScanThreads)
    Mamba2StepKernel(Mamba2StepParams p) {
  JoinLaunchChain();
  __shared__ float xs[kRowsPerBlock];
  __shared__ float bcs[2 * kMaxStepState];
  const Mamba2ScanParams& q = p.scan;
  const WarpRows w = RowsOfWarp(q);
  const int lane = threadIdx.x & 31;
  const int n = q.n_state, h = w.head;
  const int e = q.heads * q.head_dim;
  const int group = op_math::Mamba2Group(h, q.heads, q.groups) * n;
  const int block_p0 = w.p0 - (threadIdx.x / 32) * kRowsPerWarp;
  const int block_rows = q.head_dim - block_p0 < kRowsPerBlock
                             ? q.head_dim - block_p0
                             : kRowsPerBlock;
  const int x_ch = h * q.head_dim + block_p0;
  const float a = q.a[h], dt_bias = q.dt_bias[h], d = q.d[h];
  const int64_t channel0 = static_cast<int64_t>(h) * q.head_dim + w.p0;
  for (int s = blockIdx.y; s < q.nsegs; s += gridDim.y) {
    const Segment seg = q.segs[s];
    // Padding segments may share a real segment's slot: no state access
    // (uniform over the block, which serves one segment).
    if (seg.len <= 0) continue;
    float* state = q.state + seg.slot * q.state_stride + channel0 * n;
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
      for (int j = threadIdx.x; j < 2 * n + block_rows; j += blockDim.x) {
        if (j < n) {
          bcs[j] = ConvAt(p.conv, seg, t, e + group + j);
        } else if (j < 2 * n) {
          bcs[j] = ConvAt(p.conv, seg, t, e + q.groups * n + group + j - n);
        } else {
          xs[j - 2 * n] = ConvAt(p.conv, seg, t, x_ch + j - 2 * n);
        }
      }
      __syncthreads();
      const float delta = op_math::Mamba2Delta(q.dt[t * q.lddt + h], dt_bias,
                                               q.dt_min, q.dt_max);
      const float decay = op_math::Mamba2Decay(delta, a);
      float bv[R], cv[R];
#pragma unroll
      for (int j = 0; j < R; ++j) {
        const int i = lane + 32 * j;
        bv[j] = i < n ? bcs[i] : 0.0f;
        cv[j] = i < n ? bcs[n + i] : 0.0f;
      }
      const float* z = p.norm.z + t * p.norm.ldz + channel0;
      float* out = q.out + t * q.ldo + channel0;
#pragma unroll
      for (int r = 0; r < kRowsPerWarp; ++r) {
        if (r >= w.rows) break;  // the same for every lane of the warp
        const float xv = xs[w.p0 - block_p0 + r];
        const float dx = delta * xv;
        float acc = 0.0f;
#pragma unroll
        for (int j = 0; j < R; ++j) {
          st[r][j] = op_math::Mamba2StateEntry(st[r][j], decay, dx, bv[j]);
          acc += cv[j] * st[r][j];
        }
        acc = WarpSum(acc);
        if (lane == 0) out[r] = op_math::GatedValue(acc + d * xv, z[r]);
      }
      __syncthreads();  // the next token's conv overwrites xs and bcs
    }
#pragma unroll
    for (int r = 0; r < kRowsPerWarp; ++r) {
#pragma unroll
      for (int j = 0; j < R; ++j) {
        const int i = lane + 32 * j;
        if (r < w.rows && i < n) state[r * n + i] = st[r][j];
      }
    }
    // Only this block reads its x channels' windows.
    for (int j = threadIdx.x; j < block_rows; j += blockDim.x) {
      MoveWindow(p.conv, seg, x_ch + j);
    }
  }
}

// Block (segment, norm group): GatedRmsNormKernel on the gated values the
// first kernel left in scan.out; group 0's block also moves the B and C
// windows on.
__global__ void __launch_bounds__(kNormThreads)
    Mamba2StepNormKernel(Mamba2StepParams p) {
  JoinLaunchChain();
  const GatedRmsNormParams& q = p.norm;
  const int gs = q.d / q.groups;
  const int64_t lo = static_cast<int64_t>(blockIdx.y) * gs;
  const int e = p.scan.heads * p.scan.head_dim;
  const int bc = 2 * p.scan.groups * p.scan.n_state;
  for (int s = blockIdx.x; s < p.scan.nsegs; s += gridDim.x) {
    const Segment seg = p.scan.segs[s];
    if (seg.len <= 0) continue;
    const int64_t end = static_cast<int64_t>(seg.start) + seg.len;
    for (int64_t t = seg.start; t < end; ++t) {
      const float* v = q.y + t * q.ldy + lo;
      float* out = q.out + t * q.ldo + lo;
      float sq = 0.0f;
      for (int j = threadIdx.x; j < gs; j += blockDim.x) sq += v[j] * v[j];
      const float scale = op_math::RmsScale(BlockSum(sq), gs, q.eps);
      for (int j = threadIdx.x; j < gs; j += blockDim.x) {
        const float o = v[j] * scale * q.w[lo + j];
        out[j] = o;
        StoreHalf(q.out16, t, lo + j, o);
      }
    }
    if (blockIdx.y == 0) {
      for (int j = threadIdx.x; j < bc; j += blockDim.x) {
        MoveWindow(p.conv, seg, e + j);
      }
    }
  }
}

int NormThreads(int group_size) {
  const int warps = (group_size + 31) / 32;
  return warps >= kNormThreads / 32 ? kNormThreads : warps * 32;
}

}  // namespace

void LaunchMamba2Scan(const Mamba2ScanParams& p, LaunchQueue queue) {
  if (p.nsegs <= 0 || p.heads <= 0 || p.head_dim <= 0 || p.n_state <= 0) {
    return;
  }
  const int blocks_per_head = (p.head_dim + kRowsPerBlock - 1) / kRowsPerBlock;
  const dim3 grid(p.heads * blocks_per_head,
                  p.nsegs < kMaxGridY ? p.nsegs : kMaxGridY);
  const int per_lane = (p.n_state + 31) / 32;
  if (per_lane <= 1) {
    SEQBOAT_LAUNCH_ON(grid, kScanThreads, 0, queue, Mamba2ScanRegKernel<1>)(p);
  } else if (per_lane <= 2) {
    SEQBOAT_LAUNCH_ON(grid, kScanThreads, 0, queue, Mamba2ScanRegKernel<2>)(p);
  } else if (per_lane <= 4) {
    SEQBOAT_LAUNCH_ON(grid, kScanThreads, 0, queue, Mamba2ScanRegKernel<4>)(p);
  } else if (per_lane <= 8) {
    SEQBOAT_LAUNCH_ON(grid, kScanThreads, 0, queue, Mamba2ScanRegKernel<8>)(p);
  } else {
    SEQBOAT_LAUNCH_ON(grid, kScanThreads, 0, queue, Mamba2ScanGlobalKernel)(p);
  }
}

void LaunchGatedRmsNorm(const GatedRmsNormParams& p, LaunchQueue queue) {
  if (p.n <= 0 || p.d <= 0 || p.groups <= 0) return;
  SEQBOAT_LAUNCH_ON(dim3(p.n, p.groups), NormThreads(p.d / p.groups), 0, queue,
                    GatedRmsNormKernel)
  (p);
}

bool Mamba2StepFuses(const Mamba2StepParams& p) {
  const Mamba2ScanParams& q = p.scan;
  if (q.heads <= 0 || q.head_dim <= 0 || q.n_state <= 0 ||
      q.n_state > kMaxStepState || q.groups <= 0 || p.norm.groups <= 0 ||
      p.conv.k != kStepTaps) {
    return false;
  }
  const int e = q.heads * q.head_dim, gn = q.groups * q.n_state;
  return p.conv.segs == q.segs && p.conv.nsegs == q.nsegs &&
         p.conv.e == e + 2 * gn && q.ldxbc == p.conv.e && q.x == p.conv.out &&
         q.b == q.x + e && q.c == q.b + gn && p.norm.y == q.out &&
         p.norm.d == e && e % p.norm.groups == 0;
}

void LaunchMamba2Step(const Mamba2StepParams& p, LaunchQueue queue) {
  const Mamba2ScanParams& q = p.scan;
  if (q.nsegs <= 0) return;
  const int blocks_per_head = (q.head_dim + kRowsPerBlock - 1) / kRowsPerBlock;
  const int segs = q.nsegs < kMaxGridY ? q.nsegs : kMaxGridY;
  const dim3 grid(q.heads * blocks_per_head, segs);
  const int per_lane = (q.n_state + 31) / 32;
  if (per_lane <= 1) {
    SEQBOAT_LAUNCH_ON(grid, kScanThreads, 0, queue, Mamba2StepKernel<1>)(p);
  } else if (per_lane <= 2) {
    SEQBOAT_LAUNCH_ON(grid, kScanThreads, 0, queue, Mamba2StepKernel<2>)(p);
  } else if (per_lane <= 4) {
    SEQBOAT_LAUNCH_ON(grid, kScanThreads, 0, queue, Mamba2StepKernel<4>)(p);
  } else {
    SEQBOAT_LAUNCH_ON(grid, kScanThreads, 0, queue, Mamba2StepKernel<8>)(p);
  }
  SEQBOAT_LAUNCH_ON(dim3(segs, p.norm.groups),
                    NormThreads(p.norm.d / p.norm.groups), 0, queue,
                    Mamba2StepNormKernel)
  (p);
}

}  // namespace seqboat::cuda
