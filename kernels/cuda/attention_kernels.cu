// Sink + rolling-window attention (flash-decoding style).
//
// SinkAttention: one block per (item, KV head, chunk of that head's query
// heads, key split). The block's warps take the split's keys round-robin;
// every lane holds a slice of each head vector, so a key is loaded and
// rotated once per block and dotted with all of the chunk's query heads
// (one warp reduction per head). Each warp keeps its own online-softmax state
// in registers; the warps are merged through shared memory at the end. With
// one split the block writes the output; otherwise it writes its partial
// (m, l, acc) and a small combine kernel merges the splits of each row.
#include <math.h>

#include <algorithm>

#include "engine/backend/attention_math.h"
#include "kernels/cuda/attention_kernels.h"
#include "kernels/cuda/half_rows.cuh"
#include "kernels/cuda/launch.cuh"

namespace seqboat::cuda {
namespace {

namespace am = attention_math;

constexpr int kWarps = 4;
constexpr int kThreads = 32 * kWarps;
constexpr int kCombineThreads = 128;
constexpr int kAppendThreads = 128;
constexpr int kCountThreads = 128;
// Pairs per lane at kSinkMaxHeadDim.
constexpr int kMaxPairs = (kSinkMaxHeadDim / 2 + 31) / 32;
// Splitting pays only when each split still has a few keys per warp, and
// only until the grid covers the GPU a few times over.
constexpr int64_t kMinKeysPerSplit = 128;
constexpr int64_t kTargetBlocks = 512;
constexpr int64_t kMaxSplits = 64;

// Lane elements come in RoPE pairs (lo, lo + hd2), hd2 = ceil(d / 2), with
// lo = lane + 32 e for e < pairs per lane.
int PairsPerLane(int head_dim) {
  const int hd2 = (head_dim + 1) / 2;
  return hd2 <= 32 ? 1 : hd2 <= 64 ? 2 : hd2 <= 128 ? 4 : 8;
}

// Query heads per block: their accumulators live in registers, so fewer for
// long heads.
__host__ __device__ constexpr int HeadsPerBlock(int pairs) {
  return pairs <= 2 ? 8 : 16 / pairs;
}

int64_t CeilDiv(int64_t a, int64_t b) { return (a + b - 1) / b; }

__device__ __forceinline__ float WarpSum(float v) {
  // xor butterfly: every lane ends with the same bits.
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}

// The lane's slice of a head vector x[0, d): r[2e] = x[lo], r[2e + 1] =
// x[lo + hd2] (0 where out of range), RMS-normed over the head when norm_w
// is given (the whole warp must call), then rotated by the cos/sin row when
// given (RoPE needs d even, so then hd2 = d / 2 and each pair rotates
// in-lane). The norm's sum runs over the lane's elements in slot order, then
// the butterfly: a lane beyond kP's slots adds exact zeros, so any kP >= the
// head's gives the same bits (the store kernel relies on it).
template <int kP>
__device__ __forceinline__ void LoadLane(const float* x, int d, int hd2,
                                         int lane, const float* norm_w,
                                         float eps, const float* cos_row,
                                         const float* sin_row, float* r) {
  float pair[kP][2];
#pragma unroll
  for (int e = 0; e < kP; ++e) {
    const int lo = lane + 32 * e;
    pair[e][0] = lo < hd2 ? x[lo] : 0.0f;
    pair[e][1] = lo < hd2 && lo + hd2 < d ? x[lo + hd2] : 0.0f;
  }
  if (norm_w != nullptr) {
    float sum_sq = 0.0f;
#pragma unroll
    for (int e = 0; e < kP; ++e) {
      sum_sq = fmaf(pair[e][0], pair[e][0], sum_sq);
      sum_sq = fmaf(pair[e][1], pair[e][1], sum_sq);
    }
    const float scale = op_math::RmsScale(WarpSum(sum_sq), d, eps);
#pragma unroll
    for (int e = 0; e < kP; ++e) {
      const int lo = lane + 32 * e;
      if (lo < hd2) {
        pair[e][0] = pair[e][0] * scale * norm_w[lo];
        if (lo + hd2 < d) pair[e][1] = pair[e][1] * scale * norm_w[lo + hd2];
      }
    }
  }
#pragma unroll
  for (int e = 0; e < kP; ++e) {
    const int lo = lane + 32 * e;
    if (cos_row != nullptr && lo < hd2) {
      am::RopeHalf(pair[e], cos_row + lo, sin_row + lo, 2, &r[2 * e]);
    } else {
      r[2 * e] = pair[e][0];
      r[2 * e + 1] = pair[e][1];
    }
  }
}

// Element of a head vector held in lane slot (q, lane); -1 if none.
__device__ __forceinline__ int SlotElement(int q, int lane, int d, int hd2) {
  const int lo = lane + 32 * (q >> 1);
  const int elem = (q & 1) ? lo + hd2 : lo;
  return lo < hd2 && elem < d ? elem : -1;
}

template <int kP>
__global__ void __launch_bounds__(kThreads)
    SinkAttentionKernel(SinkAttentionParams p, SinkWork work) {
  JoinLaunchChain();
  constexpr int kE = 2 * kP;
  constexpr int kH = HeadsPerBlock(kP);
  __shared__ float s_m[kWarps][kH];
  __shared__ float s_l[kWarps][kH];
  __shared__ float s_acc[kWarps][kH][kE * 32];

  const SinkRow item = work.items[blockIdx.x];
  const Segment seg = p.segs[item.seg];
  // Padding (and rows past a segment's end) read no cache; uniform per block.
  if (item.i >= seg.len) return;

  const int d = p.dims.head_dim, hd2 = (d + 1) / 2, half = d / 2;
  const int s_ = p.dims.sinks, w_ = p.dims.window;
  const int group = p.dims.n_heads / p.dims.n_kv_heads;
  const int chunks = (group + kH - 1) / kH;
  const int g = blockIdx.y / chunks;
  const int h0 = g * group + (blockIdx.y % chunks) * kH;  // first query head
  const int hb = min(kH, (g + 1) * group - h0);
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const bool rope = p.rope_cos != nullptr;

  const char* slot =
      static_cast<const char*>(p.cache) + seg.slot * p.slot_bytes;
  const int64_t t0 = *reinterpret_cast<const int64_t*>(slot);
  const int64_t t = t0 + item.i;
  const int64_t row = static_cast<int64_t>(seg.start) + item.i;
  const float* kc =
      reinterpret_cast<const float*>(slot + am::kCacheHeaderBytes) +
      static_cast<int64_t>(g) * am::CacheRows(s_, w_) * d;
  const float* vc = kc + am::CacheFloats(p.dims.n_kv_heads, d, s_, w_);

  float qr[kH][kE];
  const int64_t pq = am::QueryPosition(t, s_, w_);
#pragma unroll
  for (int j = 0; j < kH; ++j) {
    if (j < hb) {
      LoadLane<kP>(p.q + row * p.ldq + static_cast<int64_t>(h0 + j) * d, d, hd2,
                   lane, p.norms.q_w, p.norms.eps,
                   rope ? p.rope_cos + pq * half : nullptr,
                   rope ? p.rope_sin + pq * half : nullptr, qr[j]);
    } else {
#pragma unroll
      for (int e = 0; e < kE; ++e) qr[j][e] = 0.0f;
    }
  }

  float m[kH], l[kH], acc[kH][kE];
#pragma unroll
  for (int j = 0; j < kH; ++j) {
    m[j] = -INFINITY;
    l[j] = 0.0f;
#pragma unroll
    for (int e = 0; e < kE; ++e) acc[j][e] = 0.0f;
  }

  const int64_t nk = am::NumKeys(t, s_, w_);
  const int64_t u_begin = blockIdx.z * work.keys_per_split;
  const int64_t u_end = min(nk, u_begin + work.keys_per_split);
  // Warp-uniform loop: all lanes take part in every shuffle.
  for (int64_t u = u_begin + warp; u < u_end; u += kWarps) {
    const int64_t tk = am::KeyStreamIndex(t, u, s_, w_);
    // Earlier steps' keys are cached (normed already); this step's are rows
    // of the segment.
    const float *key, *val, *key_norm = nullptr;
    if (tk < t0) {
      const int64_t r = am::CacheRowOf(tk, s_, w_);
      key = kc + r * d;
      val = vc + r * d;
    } else {
      const int64_t r = seg.start + (tk - t0);
      key = p.k + r * p.ldk + static_cast<int64_t>(g) * d;
      val = p.v + r * p.ldv + static_cast<int64_t>(g) * d;
      key_norm = p.norms.k_w;
    }
    float kr[kE], vr[kE];
    const int64_t pk = rope ? am::KeyPosition(t, tk, s_, w_) : 0;
    LoadLane<kP>(key, d, hd2, lane, key_norm, p.norms.eps,
                 rope ? p.rope_cos + pk * half : nullptr,
                 rope ? p.rope_sin + pk * half : nullptr, kr);
    LoadLane<kP>(val, d, hd2, lane, nullptr, 0.0f, nullptr, nullptr, vr);
#pragma unroll
    for (int j = 0; j < kH; ++j) {
      if (j < hb) {
        const float score = WarpSum(am::Dot(qr[j], kr, kE)) * p.dims.scale;
        am::OnlineSoftmaxAdd(&m[j], &l[j], acc[j], score, vr, kE);
      }
    }
  }

  // Merge the warps: slot (q, lane) of head j is owned by one thread below.
#pragma unroll
  for (int j = 0; j < kH; ++j) {
    if (j < hb) {
      if (lane == 0) {
        s_m[warp][j] = m[j];
        s_l[warp][j] = l[j];
      }
#pragma unroll
      for (int e = 0; e < kE; ++e) s_acc[warp][j][e * 32 + lane] = acc[j][e];
    }
  }
  __syncthreads();

  const int64_t out_stride = static_cast<int64_t>(p.dims.n_heads) * d;
  const int64_t parts =
      static_cast<int64_t>(work.nitems) * p.dims.n_heads * work.splits;
  for (int idx = threadIdx.x; idx < hb * kE * 32; idx += kThreads) {
    const int j = idx / (kE * 32), sl = idx % (kE * 32);
    const int elem = SlotElement(sl >> 5, sl & 31, d, hd2);
    if (elem < 0) continue;
    float mm = -INFINITY, ll = 0.0f, a = 0.0f;
    for (int w = 0; w < kWarps; ++w) {
      am::OnlineSoftmaxMerge(&mm, &ll, &a, s_m[w][j], s_l[w][j],
                             &s_acc[w][j][sl], 1);
    }
    const int h = h0 + j;
    if (work.splits == 1) {
      const int64_t col = static_cast<int64_t>(h) * d + elem;
      float* o = p.out + row * out_stride + col;
      am::OnlineSoftmaxFinish(
          ll, &a, p.gate != nullptr ? p.gate + row * p.ldgate + col : nullptr,
          1, o);
      StoreHalf(p.out16, row, col, *o);
    } else {
      const int64_t pi =
          (static_cast<int64_t>(blockIdx.x) * p.dims.n_heads + h) *
              work.splits +
          blockIdx.z;
      work.workspace[pi * d + elem] = a;
      if (elem == 0) {
        float* ml = work.workspace + parts * d;
        ml[2 * pi] = mm;
        ml[2 * pi + 1] = ll;
      }
    }
  }
}

// Folds the splits of one (item, query head) in split order. Splits past a
// query's key count hold l = 0 and drop out of the merge.
__global__ void __launch_bounds__(kCombineThreads)
    SinkCombineKernel(SinkAttentionParams p, SinkWork work) {
  JoinLaunchChain();
  const SinkRow item = work.items[blockIdx.x];
  const Segment seg = p.segs[item.seg];
  if (item.i >= seg.len) return;
  const int d = p.dims.head_dim, h = blockIdx.y;
  const int64_t row = static_cast<int64_t>(seg.start) + item.i;
  const int64_t parts =
      static_cast<int64_t>(work.nitems) * p.dims.n_heads * work.splits;
  const int64_t base =
      (static_cast<int64_t>(blockIdx.x) * p.dims.n_heads + h) * work.splits;
  const float* ml = work.workspace + parts * d;
  const int64_t col = static_cast<int64_t>(h) * d;
  float* out = p.out + row * p.dims.n_heads * d + col;
  const float* gate =
      p.gate != nullptr ? p.gate + row * p.ldgate + col : nullptr;
  for (int elem = threadIdx.x; elem < d; elem += blockDim.x) {
    float m = -INFINITY, l = 0.0f, a = 0.0f;
    for (int s = 0; s < work.splits; ++s) {
      const int64_t pi = base + s;
      am::OnlineSoftmaxMerge(&m, &l, &a, ml[2 * pi], ml[2 * pi + 1],
                             work.workspace + pi * d + elem, 1);
    }
    am::OnlineSoftmaxFinish(l, &a, gate != nullptr ? gate + elem : nullptr, 1,
                            out + elem);
    StoreHalf(p.out16, row, col + elem, out[elem]);
  }
}

// One block per item: copies the row's k, v of every KV head to its cache
// row if the token stays cached (a sink, or among the last W tokens of the
// segment's end; rows a later row of the chunk evicts are never stored).
// kAdvance: the block is its slot's only reader of the count (a decode call,
// one row per segment), so it also moves the count once every thread has
// read it.
template <bool kAdvance>
__global__ void __launch_bounds__(kAppendThreads)
    SinkStoreKernel(SinkAppendParams p, SinkWork work) {
  JoinLaunchChain();
  const SinkRow item = work.items[blockIdx.x];
  const Segment seg = p.segs[item.seg];
  if (item.i >= seg.len) return;
  const int s_ = p.dims.sinks, w_ = p.dims.window, d = p.dims.head_dim;
  char* slot = static_cast<char*>(p.cache) + seg.slot * p.slot_bytes;
  const int64_t t0 = *reinterpret_cast<const int64_t*>(slot);
  const int64_t tk = t0 + item.i, end = t0 + seg.len;
  const bool keep = tk < s_ || (w_ > 0 && tk >= end - w_);
  if (keep) {
    const int64_t r = am::CacheRowOf(tk, s_, w_);
    const int64_t rows_per_head = am::CacheRows(s_, w_);
    float* kc = reinterpret_cast<float*>(slot + am::kCacheHeaderBytes);
    float* vc = kc + am::CacheFloats(p.dims.n_kv_heads, d, s_, w_);
    const int64_t row = static_cast<int64_t>(seg.start) + item.i;
    const float* ks = p.k + row * p.ldk;
    const float* vs = p.v + row * p.ldv;
    const int64_t total = static_cast<int64_t>(p.dims.n_kv_heads) * d;
    const bool norm = p.norms.k_w != nullptr;
    for (int64_t x = threadIdx.x; x < total; x += blockDim.x) {
      const int64_t g = x / d, c = x % d;
      const int64_t dst = (g * rows_per_head + r) * d + c;
      if (!norm) kc[dst] = ks[x];
      vc[dst] = vs[x];
    }
    if (norm) {
      // A warp per head, normed as the attention kernel norms this row's key
      // (LoadLane, the widest slots: the same bits).
      const int lane = threadIdx.x & 31, hd2 = (d + 1) / 2;
      for (int g = threadIdx.x >> 5; g < p.dims.n_kv_heads;
           g += kAppendThreads / 32) {
        float kr[2 * kMaxPairs];
        LoadLane<kMaxPairs>(ks + static_cast<int64_t>(g) * d, d, hd2, lane,
                            p.norms.k_w, p.norms.eps, nullptr, nullptr, kr);
        float* head = kc + (g * rows_per_head + r) * d;
#pragma unroll
        for (int q = 0; q < 2 * kMaxPairs; ++q) {
          const int elem = SlotElement(q, lane, d, hd2);
          if (elem >= 0) head[elem] = kr[q];
        }
      }
    }
  }
  if (kAdvance) {
    __syncthreads();
    if (threadIdx.x == 0) *reinterpret_cast<int64_t*>(slot) = end;
  }
}

// Runs after SinkStoreKernel<false>, which reads the counts this moves.
__global__ void __launch_bounds__(kCountThreads)
    SinkCountKernel(SinkAppendParams p) {
  JoinLaunchChain();
  const int s = blockIdx.x * blockDim.x + threadIdx.x;
  if (s >= p.nsegs) return;
  const Segment seg = p.segs[s];
  // A zero-length segment may share its slot with a real one: no write.
  if (seg.len <= 0) return;
  int64_t* count = reinterpret_cast<int64_t*>(static_cast<char*>(p.cache) +
                                              seg.slot * p.slot_bytes);
  *count += seg.len;
}

}  // namespace

SinkAttentionPlan PlanSinkAttention(int nitems, int n_heads, int n_kv_heads,
                                    int head_dim, int sinks, int window) {
  SinkAttentionPlan plan;
  const int group = n_heads / n_kv_heads;
  const int chunks =
      static_cast<int>(CeilDiv(group, HeadsPerBlock(PairsPerLane(head_dim))));
  const int64_t max_keys = static_cast<int64_t>(sinks) + window + 1;
  const int64_t blocks = static_cast<int64_t>(nitems) * n_kv_heads * chunks;
  int64_t splits = CeilDiv(max_keys, kMinKeysPerSplit);
  if (blocks > 0) splits = std::min(splits, CeilDiv(kTargetBlocks, blocks));
  splits = std::max<int64_t>(1, std::min(splits, kMaxSplits));
  plan.keys_per_split = CeilDiv(max_keys, splits);
  // No split starts past max_keys.
  plan.splits = static_cast<int>(CeilDiv(max_keys, plan.keys_per_split));
  if (plan.splits > 1) {
    plan.workspace_floats = static_cast<int64_t>(nitems) * n_heads *
                            plan.splits * (static_cast<int64_t>(head_dim) + 2);
  }
  return plan;
}

void LaunchSinkAttention(const SinkAttentionParams& p, const SinkWork& work,
                         LaunchQueue queue) {
  if (work.nitems <= 0) return;
  const int pairs = PairsPerLane(p.dims.head_dim);
  const int group = p.dims.n_heads / p.dims.n_kv_heads;
  const int chunks = static_cast<int>(CeilDiv(group, HeadsPerBlock(pairs)));
  const dim3 grid(work.nitems, p.dims.n_kv_heads * chunks, work.splits);
  switch (pairs) {
    case 1:
      SEQBOAT_LAUNCH_ON(grid, kThreads, 0, queue, SinkAttentionKernel<1>)
      (p, work);
      break;
    case 2:
      SEQBOAT_LAUNCH_ON(grid, kThreads, 0, queue, SinkAttentionKernel<2>)
      (p, work);
      break;
    case 4:
      SEQBOAT_LAUNCH_ON(grid, kThreads, 0, queue, SinkAttentionKernel<4>)
      (p, work);
      break;
    default:
      SEQBOAT_LAUNCH_ON(grid, kThreads, 0, queue, SinkAttentionKernel<8>)
      (p, work);
      break;
  }
  if (work.splits > 1) {
    SEQBOAT_LAUNCH_ON(dim3(work.nitems, p.dims.n_heads), kCombineThreads, 0,
                      queue, SinkCombineKernel)
    (p, work);
  }
}

void LaunchSinkCacheAppend(const SinkAppendParams& p, const SinkWork& work,
                           LaunchQueue queue) {
  if (work.nitems <= 0 || p.nsegs <= 0) return;
  if (work.one_row_per_segment) {
    SEQBOAT_LAUNCH_ON(work.nitems, kAppendThreads, 0, queue,
                      SinkStoreKernel<true>)
    (p, work);
    return;
  }
  SEQBOAT_LAUNCH_ON(work.nitems, kAppendThreads, 0, queue,
                    SinkStoreKernel<false>)
  (p, work);
  SEQBOAT_LAUNCH_ON(static_cast<int>(CeilDiv(p.nsegs, kCountThreads)),
                    kCountThreads, 0, queue, SinkCountKernel)
  (p);
}

}  // namespace seqboat::cuda
