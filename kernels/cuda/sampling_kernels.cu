// Sampling kernels. The host Sampler (engine/backend/sampler.cc) is the
// specification; every step below names the host code it mirrors.
//
// Exactness: every logit transform is one IEEE operation on both sides
// (products through __fmul_rn so nothing is fused into an FMA), rankings
// compare the same floats with ties to the lower id, and weights come from
// the shared SoftmaxWeight. Only the double sums run in another order than
// the host's, which moves a top-p or draw boundary by rounding alone.
//
// Order of the draw: the host walks the surviving tokens best first once
// top-k or top-p has ranked them, in id order otherwise. Ranked rows are
// sorted here by a segmented CUB radix sort of 64-bit keys (logit descending,
// then id ascending), so "position j" is rank j; other rows walk ids.
#include <limits.h>
#include <math.h>

// The CUDA emulation (kernels/emu) provides namespace cub itself: CUB's
// headers are device code.
#ifndef SEQBOAT_CUDA_EMULATION
#include <cub/cub.cuh>
#endif

#include "engine/backend/sample_row.h"
#include "engine/backend/sampling_math.h"
#include "kernels/cuda/launch.cuh"
#include "kernels/cuda/sampling_kernels.h"

namespace seqboat::cuda {
namespace {

constexpr int kThreads = 512;
// Scans give each thread kItems consecutive positions per tile.
constexpr int kItems = 8;
constexpr int kTile = kThreads * kItems;
// Logits each thread of PrepareKernel loads before using them.
constexpr int kPrepareUnroll = 8;

// The host's Draw ranks candidates only for top-k (when it cuts) or top-p;
// the device sorts every row that might need it, decided before the
// candidate count is known.
SEQBOAT_HD bool MayRank(const SampleRow& r) {
  return !sampling::IsGreedy(r.temperature, r.top_k) &&
         (r.top_p < 1.0f || r.top_k > 0);
}

// What the prepare pass learns about a row, for the draw pass.
struct RowState {
  int32_t count;    // candidates: tempered logit > -inf
  int32_t argmax;   // best penalised logit (Sampler::ArgMax)
  int32_t ranked;   // the draw walks the sorted keys
  int32_t done;     // tokens[row] is final (greedy, empty row, no candidate)
  float max_logit;  // best tempered logit
};

struct Workspace {
  float* work = nullptr;          // [m, vocab] tempered logits
  uint64_t* keys[2] = {nullptr};  // [m, vocab] sort keys, CUB double buffer
  RowState* state = nullptr;      // [m]
  int32_t* begin = nullptr;       // [m] CUB segment offsets
  int32_t* end = nullptr;         // [m]
  void* sort_temp = nullptr;
  size_t sort_temp_bytes = 0;
};

size_t AlignUp(size_t bytes) { return (bytes + 255) & ~size_t{255}; }

// Bits that hold every id below vocab.
int IdBits(int vocab) {
  int bits = 1;
  while ((int64_t{1} << bits) < vocab) ++bits;
  return bits;
}

// Byte offsets of the workspace's parts; total 0 when the shape is unusable.
struct Layout {
  size_t work = 0, keys0 = 0, keys1 = 0, state = 0, begin = 0, end = 0,
         temp = 0, temp_bytes = 0, total = 0;
};

Layout MakeLayout(int m, int vocab) {
  Layout l;
  if (m <= 0 || vocab <= 0) return l;
  const int64_t items = int64_t{m} * vocab;
  if (items > INT_MAX) return l;
  cub::DoubleBuffer<uint64_t> none(nullptr, nullptr);
  if (cub::DeviceSegmentedRadixSort::SortKeys(
          nullptr, l.temp_bytes, none, static_cast<int>(items), m,
          static_cast<const int32_t*>(nullptr),
          static_cast<const int32_t*>(nullptr), 0,
          32 + IdBits(vocab)) != cudaSuccess) {
    cudaGetLastError();
    return Layout{};
  }
  size_t at = 0;
  const auto take = [&at](size_t bytes) {
    const size_t off = at;
    at += AlignUp(bytes);
    return off;
  };
  l.work = take(static_cast<size_t>(items) * sizeof(float));
  l.keys0 = take(static_cast<size_t>(items) * sizeof(uint64_t));
  l.keys1 = take(static_cast<size_t>(items) * sizeof(uint64_t));
  l.state = take(static_cast<size_t>(m) * sizeof(RowState));
  l.begin = take(static_cast<size_t>(m) * sizeof(int32_t));
  l.end = take(static_cast<size_t>(m) * sizeof(int32_t));
  l.temp = take(l.temp_bytes);
  l.total = at;
  return l;
}

// Ascending key order = the host's rank order: logit descending, then id
// ascending. -0 keys as +0 because the host's == does not tell them apart.
__device__ __forceinline__ uint64_t RankKey(float logit, int32_t id,
                                            int id_bits) {
  uint32_t bits = __float_as_uint(logit);
  if (bits == 0x80000000u) bits = 0;
  // Monotone map of floats to unsigned integers, then inverted.
  const uint32_t up = (bits & 0x80000000u) ? ~bits : (bits | 0x80000000u);
  return (static_cast<uint64_t>(~up) << id_bits) | static_cast<uint32_t>(id);
}

__device__ __forceinline__ float KeyLogit(uint64_t key, int id_bits) {
  const uint32_t up = ~static_cast<uint32_t>(key >> id_bits);
  return __uint_as_float((up & 0x80000000u) ? (up & 0x7fffffffu) : ~up);
}

__device__ __forceinline__ int32_t KeyId(uint64_t key, int id_bits) {
  return static_cast<int32_t>(key & ((uint64_t{1} << id_bits) - 1));
}

struct Best {
  float logit;
  int32_t id;
};

struct RankMax {
  __device__ Best operator()(const Best& a, const Best& b) const {
    return sampling::RanksAbove(a.logit, a.id, b.logit, b.id) ? a : b;
  }
};

struct MaxFloat {
  __device__ float operator()(float a, float b) const { return fmaxf(a, b); }
};

struct MinInt {
  __device__ int operator()(int a, int b) const { return a < b ? a : b; }
};

struct MaxInt {
  __device__ int operator()(int a, int b) const { return a > b ? a : b; }
};

// A row run ahead of its pending token `pend` (sample_row.h): that token's
// logit as the host's PenalizedLogit gives it once the token is observed:
// seen (whether it was before or not), counted once more than its pair says.
// Ids are distinct, so one thread at most finds its pair. Ends synchronised.
__device__ void CountPendingToken(const SampleLaunchParams& p,
                                  const SampleRow& r, int32_t pend, bool rep_on,
                                  bool count_on, const float* in, float* work) {
  __shared__ int pending_count;
  if (threadIdx.x == 0) pending_count = 0;
  __syncthreads();
  if (count_on) {
    const int32_t* pairs = p.seen_ids + r.counted_offset;
    for (int j = threadIdx.x; j < r.counted_count; j += kThreads) {
      if (pairs[2 * j] == pend) pending_count = pairs[2 * j + 1];
    }
  }
  __syncthreads();
  if (threadIdx.x == 0) {
    float l = sampling::SanitizeLogit(__fmul_rn(in[pend], p.logit_scale));
    if (rep_on) l = sampling::PenalizeLogit(l, r.repetition_penalty);
    if (count_on) {
      l = sampling::PenalizeCount(l, pending_count + 1, r.presence_penalty,
                                  r.frequency_penalty);
    }
    work[pend] = l;
  }
  __syncthreads();
}

__device__ bool MaskAllows(const uint32_t* mask, int id) {
  return (mask[id >> 5] >> (id & 31)) & 1u;
}

// Last, as PenalizedLogit: whatever the penalties did, the suppressed ids
// (min_new_tokens) and, on a constrained row, the ids outside its mask are
// out. Returns this thread's lowest allowed id (INT_MAX: none; the block's
// least is what the host draws when every allowed logit is -inf).
// Ends synchronised.
__device__ int HoldBack(const SampleLaunchParams& p, const SampleRow& r, int v,
                        bool suppress, const uint32_t* mask, float* work) {
  if (suppress) {
    const int32_t* ids = p.seen_ids + r.suppressed_offset;
    for (int j = threadIdx.x; j < r.suppressed_count; j += kThreads) {
      const int32_t id = ids[j];
      if (id >= 0 && id < v) work[id] = -INFINITY;
    }
    __syncthreads();
  }
  int lowest_allowed = INT_MAX;
  if (mask != nullptr) {
    for (int i = threadIdx.x; i < v; i += kThreads) {
      if (MaskAllows(mask, i)) {
        lowest_allowed = min(lowest_allowed, i);
      } else {
        work[i] = -INFINITY;
      }
    }
    __syncthreads();
  }
  return lowest_allowed;
}

// Sampler::Sample up to the draw: scale (Model::Forward), sanitise and
// penalise (PenalizedLogit: repetition, then frequency and presence, then
// the suppressed ids at -inf), the
// greedy argmax (ArgMax), temperature and the candidate set (Draw's first
// loop), and sort keys for rows that may rank.
__global__ void __launch_bounds__(kThreads)
    PrepareKernel(SampleLaunchParams p, Workspace w, int id_bits) {
  using ReduceBest = cub::BlockReduce<Best, kThreads>;
  using ReduceInt = cub::BlockReduce<int, kThreads>;
  using ReduceFloat = cub::BlockReduce<float, kThreads>;
  __shared__ union {
    typename ReduceBest::TempStorage best;
    typename ReduceInt::TempStorage count;
    typename ReduceFloat::TempStorage max;
  } temp;

  const int row = blockIdx.x;
  const SampleRow r = p.rows[row];
  const int v = min(r.valid_vocab, p.vocab);
  const int64_t base = static_cast<int64_t>(row) * p.vocab;
  const bool greedy = sampling::IsGreedy(r.temperature, r.top_k);
  const bool may_rank = MayRank(r);
  if (threadIdx.x == 0) {
    w.begin[row] = static_cast<int32_t>(base);
    w.end[row] = static_cast<int32_t>(base) + (may_rank && v > 0 ? v : 0);
  }
  if (v <= 0) {  // Sample() returns 0 for an empty row
    if (threadIdx.x == 0) {
      p.tokens[row] = 0;
      w.state[row] = RowState{0, 0, 0, 1, -INFINITY};
    }
    return;
  }

  const float* in = p.logits + base;
  float* work = w.work + base;
  const bool repeat = r.repetition_penalty != 1.0f && r.seen_count > 0;
  const bool counted =
      (r.presence_penalty != 0.0f || r.frequency_penalty != 0.0f) &&
      r.counted_count > 0;
  const bool suppress = r.suppressed_count > 0;
  // A row run ahead of its pending token counts that token in (sample_row.h).
  const bool rep_on = r.repetition_penalty != 1.0f;
  const bool count_on =
      r.presence_penalty != 0.0f || r.frequency_penalty != 0.0f;
  const int32_t pend = r.pending_from >= 0 && p.pending_tokens != nullptr
                           ? p.pending_tokens[r.pending_from]
                           : -1;
  const bool pending = pend >= 0 && pend < v && (rep_on || count_on);
  const uint32_t* mask =  // a constrained row's (HoldBack)
      r.mask_row >= 0 && p.masks != nullptr
          ? p.masks + static_cast<int64_t>(r.mask_row) * p.mask_words
          : nullptr;
  const bool penalise = repeat || counted || suppress || pending || mask;
  if (penalise) {
    for (int i = threadIdx.x; i < v; i += kThreads) {
      work[i] = sampling::SanitizeLogit(__fmul_rn(in[i], p.logit_scale));
    }
    __syncthreads();
  }
  if (repeat) {
    // Ids are distinct (Sampler keeps each once), so no two threads touch
    // one logit and none is penalised twice.
    const int32_t* seen = p.seen_ids + r.seen_offset;
    for (int j = threadIdx.x; j < r.seen_count; j += kThreads) {
      const int32_t id = seen[j];
      if (id >= 0 && id < v) {
        work[id] = sampling::PenalizeLogit(work[id], r.repetition_penalty);
      }
    }
    __syncthreads();
  }
  if (counted) {
    // After the repetition penalty, as PenalizedLogit; (id, count) pairs
    // with distinct ids, so again one thread per logit.
    const int32_t* pairs = p.seen_ids + r.counted_offset;
    for (int j = threadIdx.x; j < r.counted_count; j += kThreads) {
      const int32_t id = pairs[2 * j];
      if (id >= 0 && id < v) {
        work[id] =
            sampling::PenalizeCount(work[id], pairs[2 * j + 1],
                                    r.presence_penalty, r.frequency_penalty);
      }
    }
    __syncthreads();
  }
  if (pending) CountPendingToken(p, r, pend, rep_on, count_on, in, work);
  const int lowest_allowed = HoldBack(p, r, v, suppress, mask, work);

  // One pass over the row (two with a penalty): without one, the logits are
  // sanitised as they are read. kPrepareUnroll loads per thread are issued
  // before they are used, since one block reads a whole row.
  const float inv_temperature = greedy ? 1.0f : 1.0f / r.temperature;
  uint64_t* keys = w.keys[0] + base;
  Best best{-INFINITY, INT_MAX};  // any id, even at -inf, ranks above this
  int count = 0;
  float max_logit = -INFINITY;
  for (int first = threadIdx.x; first < v; first += kThreads * kPrepareUnroll) {
    float logit[kPrepareUnroll];
#pragma unroll
    for (int u = 0; u < kPrepareUnroll; ++u) {
      const int i = first + u * kThreads;
      if (i < v) logit[u] = penalise ? work[i] : in[i];
    }
#pragma unroll
    for (int u = 0; u < kPrepareUnroll; ++u) {
      const int i = first + u * kThreads;
      if (i >= v) continue;
      const float penalised =
          penalise
              ? logit[u]
              : sampling::SanitizeLogit(__fmul_rn(logit[u], p.logit_scale));
      if (sampling::RanksAbove(penalised, i, best.logit, best.id)) {
        best = Best{penalised, i};
      }
      if (!greedy) {
        const float l = __fmul_rn(penalised, inv_temperature);
        work[i] = l;
        count += l > -INFINITY ? 1 : 0;
        max_logit = fmaxf(max_logit, l);
        if (may_rank) keys[i] = RankKey(l, i, id_bits);
      }
    }
  }
  // Only thread 0 receives the reductions; it alone writes the state.
  best = ReduceBest(temp.best).Reduce(best, RankMax());
  __syncthreads();
  count = ReduceInt(temp.count).Sum(count);
  __syncthreads();
  max_logit = ReduceFloat(temp.max).Reduce(max_logit, MaxFloat());
  int least = INT_MAX;
  if (mask != nullptr) {
    __syncthreads();
    least = ReduceInt(temp.count).Reduce(lowest_allowed, MinInt());
  }
  if (threadIdx.x == 0) {
    // No allowed id above -inf: the host's fallback, the lowest allowed.
    if (mask != nullptr && least != INT_MAX && !MaskAllows(mask, best.id))
      best.id = least;
    RowState st;
    st.count = count;
    st.argmax = best.id;
    st.max_logit = max_logit;
    st.ranked = !greedy && count > 0 &&
                (r.top_p < 1.0f || (r.top_k > 0 && r.top_k < count));
    // No candidate: Draw falls back to ArgMax.
    st.done = greedy || count == 0;
    if (st.done) p.tokens[row] = best.id;
    w.state[row] = st;
  }
}

struct ScanShared {
  union {
    typename cub::BlockScan<double, kThreads>::TempStorage scan;
    typename cub::BlockReduce<int, kThreads>::TempStorage reduce;
  } temp;
  int result;
};

// Walks positions [0, n) in order summing weight(j) in double and returns
// the first position whose running sum is > target (strict) or >= target,
// or -1 with *total (when non-null) set to the whole sum. The tiling is
// fixed, so two calls see bit-identical running sums: a total from one call
// and a search in the next agree as the host's single sum does. Every
// thread of the block must call it.
template <typename WeightFn>
__device__ int FirstPrefixAbove(int n, const WeightFn& weight, double target,
                                bool strict, double* total, ScanShared& sh) {
  double carry = 0.0;
  for (int tile = 0; tile < n; tile += kTile) {
    const int first = tile + static_cast<int>(threadIdx.x) * kItems;
    double w[kItems], prefix[kItems], tile_sum;
#pragma unroll
    for (int k = 0; k < kItems; ++k) {
      w[k] = first + k < n ? weight(first + k) : 0.0;
    }
    cub::BlockScan<double, kThreads>(sh.temp.scan)
        .InclusiveSum(w, prefix, tile_sum);
    int hit = INT_MAX;
#pragma unroll
    for (int k = kItems - 1; k >= 0; --k) {  // the lowest k wins
      const double c = carry + prefix[k];
      if (first + k < n && (strict ? c > target : c >= target)) hit = first + k;
    }
    __syncthreads();
    hit = cub::BlockReduce<int, kThreads>(sh.temp.reduce).Reduce(hit, MinInt());
    if (threadIdx.x == 0) sh.result = hit;
    __syncthreads();
    hit = sh.result;
    if (hit != INT_MAX) return hit;
    carry += tile_sum;
  }
  if (total != nullptr) *total = carry;
  return -1;
}

// The last position in [0, n) where pred holds, or -1. Block-wide.
template <typename Pred>
__device__ int LastWhere(int n, const Pred& pred, ScanShared& sh) {
  int last = -1;
  for (int j = threadIdx.x; j < n; j += kThreads) {
    if (pred(j)) last = j;
  }
  __syncthreads();
  last = cub::BlockReduce<int, kThreads>(sh.temp.reduce).Reduce(last, MaxInt());
  if (threadIdx.x == 0) sh.result = last;
  __syncthreads();
  return sh.result;
}

// Draw's tail over positions [0, n) holding candidates in the host's order
// (logit(j) > -inf marks one): the min-p filter, then the first candidate
// whose running weight exceeds uniform * total, with the host's fallbacks.
// Returns a position, or -1 when no candidate is left.
template <typename LogitFn>
__device__ int DrawPosition(int n, const LogitFn& logit, float max_logit,
                            float min_p, double uniform, ScanShared& sh) {
  // An infinite logit takes all the mass: the caller's argmax, as the host.
  if (max_logit == INFINITY) return -1;
  const auto passes = [&](int j) {
    const float l = logit(j);
    return l > -INFINITY &&
           (!(min_p > 0.0f) || sampling::PassesMinP(l, max_logit, min_p));
  };
  const auto weight = [&](int j) {
    return passes(j) ? static_cast<double>(
                           sampling::SoftmaxWeight(logit(j), max_logit))
                     : 0.0;
  };
  double total = 0.0;
  FirstPrefixAbove(n, weight, INFINITY, true, &total, sh);
  const int at =
      FirstPrefixAbove(n, weight, uniform * total, true, nullptr, sh);
  if (at >= 0) return at;
  // Rounding can leave target == total: the last candidate with weight.
  const int last = LastWhere(
      n, [&](int j) { return weight(j) > 0.0; }, sh);
  if (last >= 0) return last;
  return LastWhere(n, passes, sh);
}

__global__ void __launch_bounds__(kThreads)
    DrawKernel(SampleLaunchParams p, Workspace w, const uint64_t* sorted,
               int id_bits) {
  __shared__ ScanShared sh;
  const int row = blockIdx.x;
  const RowState st = w.state[row];
  if (st.done) return;
  const SampleRow r = p.rows[row];
  const int v = min(r.valid_vocab, p.vocab);
  const int64_t base = static_cast<int64_t>(row) * p.vocab;
  const double uniform =
      sampling::UniformFromBits(sampling::CounterRandom(r.seed, r.step));
  int32_t token = st.argmax;
  if (st.ranked) {
    // Candidates are the first `count` keys (-inf sorts last); top-k keeps
    // the first k of them.
    const uint64_t* keys = sorted + base;
    const auto logit = [&](int j) { return KeyLogit(keys[j], id_bits); };
    const int k = r.top_k > 0 && r.top_k < st.count ? r.top_k : st.count;
    const float max_logit = logit(0);
    int keep = k;
    if (r.top_p < 1.0f) {
      // Smallest prefix whose probability reaches top_p; at least one.
      const auto weight = [&](int j) {
        return static_cast<double>(
            sampling::SoftmaxWeight(logit(j), max_logit));
      };
      double total = 0.0;
      FirstPrefixAbove(k, weight, INFINITY, true, &total, sh);
      const int at = FirstPrefixAbove(
          k, weight, static_cast<double>(r.top_p) * total, false, nullptr, sh);
      if (at >= 0) keep = at + 1;
    }
    const int at = DrawPosition(keep, logit, max_logit, r.min_p, uniform, sh);
    if (at >= 0) token = KeyId(keys[at], id_bits);
  } else {
    const float* work = w.work + base;
    const auto logit = [&](int j) { return work[j]; };
    const int at = DrawPosition(v, logit, st.max_logit, r.min_p, uniform, sh);
    if (at >= 0) token = at;
  }
  if (threadIdx.x == 0) p.tokens[row] = token;
}

// One thread per write: an update repeats an index only with its value
// (sample_row.h), so the writes may land in any order.
__global__ void __launch_bounds__(kThreads)
    TableWritesKernel(int32_t* table, const int32_t* writes, int32_t count) {
  const int64_t i = int64_t{blockIdx.x} * kThreads + threadIdx.x;
  if (i >= count) return;
  table[writes[2 * i]] = writes[2 * i + 1];
}

}  // namespace

cudaError_t LaunchPenaltyTableWrites(int32_t* table, const int32_t* writes,
                                     int32_t count, cudaStream_t stream) {
  if (count <= 0) return cudaSuccess;
  const int blocks = (count + kThreads - 1) / kThreads;
  SEQBOAT_LAUNCH(blocks, kThreads, 0, stream, TableWritesKernel)
  (table, writes, count);
  return cudaGetLastError();
}

bool SampleRowMayRank(const SampleRow& row) { return MayRank(row); }

size_t SampleRowsWorkspaceBytes(int m, int vocab) {
  return MakeLayout(m, vocab).total;
}

cudaError_t LaunchSampleRows(const SampleLaunchParams& p, cudaStream_t stream) {
  if (p.m <= 0) return cudaSuccess;
  const Layout l = MakeLayout(p.m, p.vocab);
  if (l.total == 0 || p.workspace_bytes < l.total) return cudaErrorInvalidValue;
  auto* bytes = static_cast<uint8_t*>(p.workspace);
  Workspace w;
  w.work = reinterpret_cast<float*>(bytes + l.work);
  w.keys[0] = reinterpret_cast<uint64_t*>(bytes + l.keys0);
  w.keys[1] = reinterpret_cast<uint64_t*>(bytes + l.keys1);
  w.state = reinterpret_cast<RowState*>(bytes + l.state);
  w.begin = reinterpret_cast<int32_t*>(bytes + l.begin);
  w.end = reinterpret_cast<int32_t*>(bytes + l.end);
  w.sort_temp = bytes + l.temp;
  w.sort_temp_bytes = l.temp_bytes;
  const int id_bits = IdBits(p.vocab);

  SEQBOAT_LAUNCH(p.m, kThreads, 0, stream, PrepareKernel)(p, w, id_bits);
  if (cudaError_t e = cudaGetLastError(); e != cudaSuccess) return e;
  const uint64_t* sorted = w.keys[0];
  if (p.any_ranked) {
    cub::DoubleBuffer<uint64_t> keys(w.keys[0], w.keys[1]);
    size_t temp_bytes = w.sort_temp_bytes;
    if (cudaError_t e = cub::DeviceSegmentedRadixSort::SortKeys(
            w.sort_temp, temp_bytes, keys, p.m * p.vocab, p.m,
            static_cast<const int32_t*>(w.begin),
            static_cast<const int32_t*>(w.end), 0, 32 + id_bits, stream);
        e != cudaSuccess) {
      return e;
    }
    sorted = keys.Current();
  }
  SEQBOAT_LAUNCH(p.m, kThreads, 0, stream, DrawKernel)(p, w, sorted, id_bits);
  return cudaGetLastError();
}

}  // namespace seqboat::cuda
