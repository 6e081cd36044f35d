// SeqBoat kernels. The per-element arithmetic is seqboat_math.h's, as on the
// CPU; these kernels only map threads to it:
//   - EMA: a channel's state is a serial recurrence over its segment's
//     tokens, so one thread owns a (segment, channel) and keeps the state in
//     registers for the whole segment.
//   - Route: the compaction is an exclusive scan over n decisions (n is a
//     step's rows, a few hundred): one block, ballot + popc per warp.
//   - Attend: each active token reads the FIFO as the previous active token of
//     its segment left it, so a segment is sequential; one block per segment,
//     warps over FIFO entries for the scores, threads over value columns.
//   - Mix: elementwise.
#include <math.h>

#include "engine/backend/op_math.h"
#include "engine/backend/seqboat_math.h"
#include "kernels/cuda/launch.cuh"
#include "kernels/cuda/seqboat_kernels.h"

namespace seqboat::cuda {
namespace {

constexpr int kEmaThreads = 128;
constexpr int kRouteMaxThreads = 1024;
constexpr int kAttendThreads = 512;
constexpr int kMixThreads = 256;
constexpr int kMaxGridY = 65535;
// Above this much dynamic shared memory a kernel must opt in.
constexpr size_t kDefaultSharedBytes = 48 * 1024;

__device__ __forceinline__ float WarpSum(float v) {
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}

__device__ __forceinline__ float WarpMax(float v) {
  for (int o = 16; o > 0; o >>= 1) {
    const float other = __shfl_xor_sync(0xffffffffu, v, o);
    v = other > v ? other : v;
  }
  return v;
}

__device__ __forceinline__ op_math::SeqBoatSlot SlotOf(void* state,
                                                       int64_t stride, int slot,
                                                       const SeqBoatShape& s) {
  return op_math::SeqBoatSlotAt(
      static_cast<char*>(state) + static_cast<int64_t>(slot) * stride, s);
}

// --- MD-EMA ------------------------------------------------------------------

// NE >= ne entries per channel in registers. The padding entries have zero
// coefficients: their state stays 0 and they add exactly 0 after the real
// terms, so the result equals SeqBoatEmaStep over ne entries, while the
// compile-time trip count keeps the arrays out of local memory.
template <int NE>
__global__ void __launch_bounds__(kEmaThreads)
    SeqBoatEmaRegKernel(SeqBoatEmaParams p) {
  JoinLaunchChain();
  const int d = p.shape.d, ne = p.shape.ne;
  const int c = blockIdx.x * blockDim.x + threadIdx.x;
  if (c >= d) return;
  const int64_t off = static_cast<int64_t>(c) * ne;
  float g[NE], phi[NE], eta[NE];
#pragma unroll
  for (int i = 0; i < NE; ++i) {
    const bool in = i < ne;
    g[i] = in ? p.in_coef[off + i] : 0.0f;
    phi[i] = in ? p.decay[off + i] : 0.0f;
    eta[i] = in ? p.out_coef[off + i] : 0.0f;
  }
  const float omega = p.skip[c];
  // More segments than the grid's rows: each row takes every gridDim.y-th.
  for (int sg = blockIdx.y; sg < p.nsegs; sg += gridDim.y) {
    const Segment seg = p.segs[sg];
    if (seg.len <= 0) continue;  // padding: no state read or written
    float* ema = SlotOf(p.state, p.state_stride, seg.slot, p.shape).ema + off;
    float s[NE];
#pragma unroll
    for (int i = 0; i < NE; ++i) s[i] = i < ne ? ema[i] : 0.0f;
    const int64_t first = static_cast<int64_t>(seg.start) * d + c;
    const int64_t end = first + static_cast<int64_t>(seg.len) * d;
    // The next token's input is loaded while this one's step runs: the
    // loads do not depend on the state, the recurrence does.
    float x_next = p.x[first];
    for (int64_t i = first; i < end; i += d) {
      const float xi = x_next;
      if (i + d < end) x_next = p.x[i + d];
      p.h[i] = op_math::SeqBoatEmaStep(s, g, phi, eta, omega, xi, NE);
    }
#pragma unroll
    for (int i = 0; i < NE; ++i) {
      if (i < ne) ema[i] = s[i];
    }
  }
}

// Any ne: the state stays in the slot (L1-resident for the segment).
__global__ void __launch_bounds__(kEmaThreads)
    SeqBoatEmaAnyKernel(SeqBoatEmaParams p) {
  JoinLaunchChain();
  const int d = p.shape.d, ne = p.shape.ne;
  const int c = blockIdx.x * blockDim.x + threadIdx.x;
  if (c >= d) return;
  const int64_t off = static_cast<int64_t>(c) * ne;
  for (int sg = blockIdx.y; sg < p.nsegs; sg += gridDim.y) {
    const Segment seg = p.segs[sg];
    if (seg.len <= 0) continue;
    float* ema = SlotOf(p.state, p.state_stride, seg.slot, p.shape).ema + off;
    const int64_t first = static_cast<int64_t>(seg.start) * d + c;
    const int64_t end = first + static_cast<int64_t>(seg.len) * d;
    for (int64_t i = first; i < end; i += d) {
      p.h[i] = op_math::SeqBoatEmaStep(ema, p.in_coef + off, p.decay + off,
                                       p.out_coef + off, p.skip[c], p.x[i], ne);
    }
  }
}

// --- latent configurator -----------------------------------------------------

// Rows in chunks of blockDim.x (a multiple of 32); `carry` counts the active
// rows of earlier chunks, so the order is the CPU's running count.
__global__ void SeqBoatRouteKernel(SeqBoatRouteParams p) {
  JoinLaunchChain();
  __shared__ int warp_count[kRouteMaxThreads / 32];
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int nwarps = blockDim.x >> 5;
  const int n = p.n;
  const float tau = p.temperature[0];
  int carry = 0;
  for (int chunk = 0; chunk < n; chunk += blockDim.x) {
    const int i = chunk + threadIdx.x;
    bool on = false;
    if (i < n) {
      const float* ui = p.u + static_cast<int64_t>(i) * p.ldu;
      float c;
      on = op_math::SeqBoatRoute(ui[0], ui[1], tau, &c);
      p.conf[i] = c;
    }
    const unsigned ballot = __ballot_sync(0xffffffffu, on);
    if (lane == 0) warp_count[warp] = __popc(ballot);
    __syncthreads();
    int before = 0, total = 0;
    for (int k = 0; k < nwarps; ++k) {
      const int cnt = warp_count[k];
      if (k < warp) before += cnt;
      total += cnt;
    }
    if (i < n) {
      if (on) {
        const int r = carry + before + __popc(ballot & ((1u << lane) - 1u));
        p.compact[i] = r;
        p.active[1 + r] = i;
      } else {
        p.compact[i] = -1;
      }
    }
    carry += total;
    __syncthreads();  // warp_count is rewritten by the next chunk
  }
  if (threadIdx.x == 0) {
    p.active[0] = carry;
    if (p.activated != nullptr) *p.activated += carry;
  }
}

// --- working-memory attention ------------------------------------------------

// Synchronisation per token (all threads run the same token loop):
//   (A) q, k of this token written; the previous token fully done (its
//       scores and ring read, its FIFO entry written).
//   (B) scores written; FIFO keys and positions no longer read.
//   (C) scores normalised.
// After (C) the token's entry is written: keys and pos[e] were last read
// before (B); value column i is read and written by the same thread only.
__global__ void __launch_bounds__(kAttendThreads)
    SeqBoatAttendKernel(SeqBoatAttendParams p, const double* rope_inv_freq,
                        float scale) {
  JoinLaunchChain();
  const Segment seg = p.segs[blockIdx.x];
  if (seg.len <= 0) return;  // padding: no state read or written
  const SeqBoatShape& sh = p.shape;
  const int z = sh.z, v = sh.v, w = sh.w;
  const bool rope = sh.pos == SeqBoatPos::kRopeInterleaved;
  const bool softmax = sh.attn_fn == SeqBoatAttnFn::kSoftmax;
  const int pairs = rope ? z / 2 : 0;
  const int tid = threadIdx.x, nthreads = blockDim.x;
  const int lane = tid & 31, warp = tid >> 5, nwarps = nthreads >> 5;

  SEQBOAT_DYNAMIC_SHARED(double, smem);
  double* inv_freq = smem;
  float* q = reinterpret_cast<float*>(smem + pairs);
  float* k = q + z;
  float* scores = k + z;
  int* ring = reinterpret_cast<int*>(scores + w + 1);
  for (int i = tid; i < pairs; i += nthreads) inv_freq[i] = rope_inv_freq[i];

  op_math::SeqBoatSlot slot = SlotOf(p.state, p.state_stride, seg.slot, sh);
  // Every thread tracks the FIFO's meta identically in registers; thread 0
  // stores it at the end.
  int64_t meta[op_math::kMetaCount];
#pragma unroll
  for (int i = 0; i < op_math::kMetaCount; ++i) meta[i] = slot.meta[i];
  const int64_t base = meta[op_math::kNextPos];

  // Each lane's contiguous share of the z dims (in pairs for rope).
  const int per_lane = rope ? (pairs + 31) / 32 : (z + 31) / 32;
  const int units = rope ? pairs : z;
  const int u0 = min(lane * per_lane, units);
  const int nu = min(per_lane, units - u0);

  // The decode form (ranges null): the segment's one row, active by compact.
  const bool decode = p.ranges == nullptr;
  const int decode_out = decode ? p.compact[seg.start] : -1;
  const SeqBoatActiveRange range =
      decode ? SeqBoatActiveRange{0, decode_out >= 0 ? 1 : 0}
             : p.ranges[blockIdx.x];
  for (int a = range.first; a < range.first + range.count; ++a) {
    const int row = decode ? seg.start : p.active_rows[a];
    const int64_t t = base + (row - seg.start);
    const int64_t in_row = decode ? seg.start : a;
    const int64_t out_row = decode ? decode_out : a;
    const float* raw = p.zrv + in_row * p.ldzrv;
    for (int i = tid; i < z; i += nthreads) {
      const float zi = op_math::Silu(raw[i]);
      q[i] = op_math::SeqBoatAffine(zi, p.qk_gamma[i], p.qk_beta[i]);
      k[i] = op_math::SeqBoatAffine(zi, p.qk_gamma[z + i], p.qk_beta[z + i]);
    }
    __syncthreads();  // (A)

    // Keys: the FIFO oldest first (j < len), then the token itself (j = len).
    const int len = static_cast<int>(meta[op_math::kFifoLen]);
    const int64_t head = meta[op_math::kFifoHead];
    for (int j = warp; j <= len; j += nwarps) {
      const bool self = j == len;
      const int idx = self ? 0 : op_math::FifoIndex(head, j, w);
      const float* kj = self ? k : slot.keys + static_cast<int64_t>(idx) * z;
      const int64_t delta = self ? 0 : slot.pos[idx] - t;
      const float part = rope
                             ? op_math::RopeRelDot(q + 2 * u0, kj + 2 * u0,
                                                   2 * nu, delta, inv_freq + u0)
                             : op_math::Dot(q + u0, kj + u0, nu);
      const float dot = WarpSum(part);
      if (lane == 0) {
        const float bias =
            rope ? 0.0f
                 : op_math::SimpleBias(p.rel_bias, sh.rel_pos_max, delta);
        scores[j] = op_math::SeqBoatScore(sh, dot, scale, bias);
        if (!self) ring[j] = idx;
      }
    }
    __syncthreads();  // (B)

    // SeqBoatNormalise's softmax (max subtracted, fp32), as warp reductions.
    const int nk = len + 1;
    if (softmax && warp == 0) {
      float mx = scores[0];
      for (int j = lane; j < nk; j += 32) mx = scores[j] > mx ? scores[j] : mx;
      mx = WarpMax(mx);
      float sum = 0.0f;
      for (int j = lane; j < nk; j += 32) {
        const float e = expf(scores[j] - mx);
        scores[j] = e;
        sum += e;
      }
      const float inv = 1.0f / WarpSum(sum);
      for (int j = lane; j < nk; j += 32) scores[j] *= inv;
    }
    __syncthreads();  // (C)

    const int e = op_math::FifoPush(meta, w);
    for (int i = tid; i < z; i += nthreads) {
      slot.keys[static_cast<int64_t>(e) * z + i] = k[i];
    }
    if (tid == 0) slot.pos[e] = t;
    float* dst = p.out + out_row * v;
    const float self_w = scores[len];
    for (int i = tid; i < v; i += nthreads) {
      const float vi = op_math::Silu(raw[z + v + i]);
      float o = self_w * vi;
#pragma unroll 8
      for (int j = 0; j < len; ++j) {
        o += scores[j] * slot.vals[static_cast<int64_t>(ring[j]) * v + i];
      }
      dst[i] = o * op_math::Silu(raw[z + i]);
      slot.vals[static_cast<int64_t>(e) * v + i] = vi;
    }
  }
  __syncthreads();  // every thread has read meta before it is stored
  if (tid == 0) {
    slot.meta[op_math::kFifoLen] = meta[op_math::kFifoLen];
    slot.meta[op_math::kFifoHead] = meta[op_math::kFifoHead];
    slot.meta[op_math::kNextPos] = base + seg.len;
  }
}

// --- output ------------------------------------------------------------------

__global__ void SeqBoatMixKernel(SeqBoatMixParams p) {
  JoinLaunchChain();
  const int64_t i = blockIdx.x;
  const int d = p.d;
  const int64_t r = i * d;
  const float* gi = p.g + i * p.ldg;
  const int32_t ci = p.compact[i];
  const float* yi = ci >= 0 ? p.y + static_cast<int64_t>(ci) * d : nullptr;
  const float c = p.conf[i];
  for (int j = threadIdx.x; j < d; j += blockDim.x) {
    p.out[r + j] =
        op_math::SeqBoatOut(p.s[r + j], gi[j], c, yi != nullptr ? yi[j] : 0.0f);
  }
}

int RowThreads(int d, int max_threads) {
  const int warps = (d + 31) / 32;
  return warps >= max_threads / 32 ? max_threads
                                   : (warps < 1 ? 32 : warps * 32);
}

}  // namespace

// Dynamic shared memory of one block: inv_freq [z/2] doubles (rope only),
// then q [z], k [z], scores [w + 1] floats, ring [w] ints (the FIFO index of
// each score).
size_t SeqBoatAttendSharedBytes(const SeqBoatShape& s) {
  const size_t pairs =
      s.pos == SeqBoatPos::kRopeInterleaved ? static_cast<size_t>(s.z) / 2 : 0;
  return 8 * pairs +
         4 * (2 * static_cast<size_t>(s.z) + (static_cast<size_t>(s.w) + 1) +
              static_cast<size_t>(s.w));
}

void LaunchSeqBoatEma(const SeqBoatEmaParams& p, LaunchQueue queue) {
  if (p.nsegs <= 0 || p.shape.d <= 0) return;
  // gridDim.y is at most 65535; the kernels loop over further segments.
  const dim3 grid((p.shape.d + kEmaThreads - 1) / kEmaThreads,
                  p.nsegs < kMaxGridY ? p.nsegs : kMaxGridY);
  const int ne = p.shape.ne;
  if (ne <= 4) {
    SEQBOAT_LAUNCH_ON(grid, kEmaThreads, 0, queue, SeqBoatEmaRegKernel<4>)(p);
  } else if (ne <= 8) {
    SEQBOAT_LAUNCH_ON(grid, kEmaThreads, 0, queue, SeqBoatEmaRegKernel<8>)(p);
  } else if (ne <= 16) {
    SEQBOAT_LAUNCH_ON(grid, kEmaThreads, 0, queue, SeqBoatEmaRegKernel<16>)(p);
  } else if (ne <= 32) {
    SEQBOAT_LAUNCH_ON(grid, kEmaThreads, 0, queue, SeqBoatEmaRegKernel<32>)(p);
  } else {
    SEQBOAT_LAUNCH_ON(grid, kEmaThreads, 0, queue, SeqBoatEmaAnyKernel)(p);
  }
}

void LaunchSeqBoatRoute(const SeqBoatRouteParams& p, LaunchQueue queue) {
  // Launched for n == 0 too: the count must still read 0.
  const int threads = RowThreads(p.n, kRouteMaxThreads);
  SEQBOAT_LAUNCH_ON(1, threads, 0, queue, SeqBoatRouteKernel)(p);
}

void LaunchSeqBoatAttend(const SeqBoatAttendParams& p, const double* inv_freq,
                         LaunchQueue queue) {
  if (p.nsegs <= 0) return;
  const size_t shared = SeqBoatAttendSharedBytes(p.shape);
  if (shared > kDefaultSharedBytes) {
    // A failure here surfaces as the launch's error.
    cudaFuncSetAttribute(SeqBoatAttendKernel,
                         cudaFuncAttributeMaxDynamicSharedMemorySize,
                         static_cast<int>(shared));
  }
  SEQBOAT_LAUNCH_ON(p.nsegs, kAttendThreads, shared, queue, SeqBoatAttendKernel)
  (p, inv_freq, op_math::SeqBoatScoreScale(p.shape));
}

void LaunchSeqBoatMix(const SeqBoatMixParams& p, LaunchQueue queue) {
  if (p.n <= 0 || p.d <= 0) return;
  SEQBOAT_LAUNCH_ON(p.n, RowThreads(p.d, kMixThreads), 0, queue,
                    SeqBoatMixKernel)
  (p);
}

}  // namespace seqboat::cuda
