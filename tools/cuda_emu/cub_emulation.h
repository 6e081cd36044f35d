// The parts of CUB that kernels/*.cu call, for the CUDA emulation
// (cuda_emulation.h includes this; the .cu files include <cub/cub.cuh> only
// when SEQBOAT_CUDA_EMULATION is not defined). CUB's own headers are device
// code that a host compiler cannot build, so these stand-ins keep CUB's call
// signatures and results, not its algorithms:
//
// - BlockReduce / BlockScan go through their TempStorage and the emulated
//   __syncthreads, so a kernel that reuses the storage without a barrier in
//   between reads clobbered values here as it would on a GPU. Reductions
//   combine in thread order and scans add in thread order, so floating-point
//   sums can differ from CUB's tree order in the last bits.
// - DeviceRadixSort / DeviceSegmentedRadixSort sort on the calling thread
//   (launches are synchronous here) with std::stable_sort of (key, value)
//   pairs by the key's bits [begin_bit, end_bit) in CUB's radix order
//   (unsigned bits; signed integers and floats twiddled as CUB does), which
//   is exactly a stable LSD radix sort's result. Null temp storage asks for
//   its size, as in CUB; a smaller buffer than that is refused.
#ifndef SEQBOAT_TOOLS_CUDA_EMU_CUB_EMULATION_H_
#define SEQBOAT_TOOLS_CUDA_EMU_CUB_EMULATION_H_

#include <cuda_runtime_api.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <type_traits>
#include <vector>

// Needs cuda_emulation.h's threadIdx / blockDim / __syncthreads; included at
// its end.
namespace cub {

template <class T>
struct DoubleBuffer {
  T* d_buffers[2] = {nullptr, nullptr};
  int selector = 0;

  DoubleBuffer() = default;
  DoubleBuffer(T* current, T* alternate) : d_buffers{current, alternate} {}
  T* Current() { return d_buffers[selector]; }
  T* Alternate() { return d_buffers[selector ^ 1]; }
};

struct NullType {};

struct Sum {
  template <class T>
  T operator()(const T& a, const T& b) const {
    return a + b;
  }
};

enum BlockReduceAlgorithm {
  BLOCK_REDUCE_RAKING_COMMUTATIVE_ONLY,
  BLOCK_REDUCE_RAKING,
  BLOCK_REDUCE_WARP_REDUCTIONS,
};

enum BlockScanAlgorithm {
  BLOCK_SCAN_RAKING,
  BLOCK_SCAN_RAKING_MEMOIZE,
  BLOCK_SCAN_WARP_SCANS,
};

namespace emu_detail {

// The linear thread index, after checking that the block has the size the
// collective was instantiated for (CUB's results are undefined otherwise).
inline int LinearThread(int threads, const char* what) {
  const int n = static_cast<int>(blockDim.x * blockDim.y * blockDim.z);
  if (n != threads) {
    std::fprintf(stderr, "cub emulation: %s for %d threads in a block of %d\n",
                 what, threads, n);
    std::abort();
  }
  return static_cast<int>(
      threadIdx.x + blockDim.x * (threadIdx.y + blockDim.y * threadIdx.z));
}

}  // namespace emu_detail

template <class T, int BLOCK_DIM_X,
          BlockReduceAlgorithm ALGORITHM = BLOCK_REDUCE_WARP_REDUCTIONS,
          int BLOCK_DIM_Y = 1, int BLOCK_DIM_Z = 1, int LEGACY_PTX_ARCH = 0>
class BlockReduce {
  static constexpr int kThreads = BLOCK_DIM_X * BLOCK_DIM_Y * BLOCK_DIM_Z;

 public:
  struct TempStorage {
    T values[kThreads];
  };

  explicit BlockReduce(TempStorage& storage) : storage_(storage) {}

  // The block's reduction, valid in thread 0 only (as in CUB).
  template <class Op>
  T Reduce(T input, Op op) {
    return Reduce(input, op, kThreads);
  }

  // Over the first num_valid threads' inputs.
  template <class Op>
  T Reduce(T input, Op op, int num_valid) {
    const int t = emu_detail::LinearThread(kThreads, "BlockReduce");
    storage_.values[t] = input;
    __syncthreads();
    if (t != 0) return input;
    T r = storage_.values[0];
    for (int i = 1; i < num_valid && i < kThreads; ++i) {
      r = op(r, storage_.values[i]);
    }
    return r;
  }

  T Sum(T input) { return Reduce(input, cub::Sum()); }
  T Sum(T input, int num_valid) { return Reduce(input, cub::Sum(), num_valid); }

 private:
  TempStorage& storage_;
};

template <class T, int BLOCK_DIM_X,
          BlockScanAlgorithm ALGORITHM = BLOCK_SCAN_RAKING, int BLOCK_DIM_Y = 1,
          int BLOCK_DIM_Z = 1, int LEGACY_PTX_ARCH = 0>
class BlockScan {
  static constexpr int kThreads = BLOCK_DIM_X * BLOCK_DIM_Y * BLOCK_DIM_Z;

 public:
  struct TempStorage {
    T partial[kThreads];  // each thread's total, then its exclusive prefix
    T aggregate;
  };

  explicit BlockScan(TempStorage& storage) : storage_(storage) {}

  // Thread-blocked inclusive scan: thread t holds positions
  // [t * ITEMS, (t + 1) * ITEMS). As CUB, a thread adds its items in order
  // onto its prefix (thread 0 has none).
  template <int ITEMS, class Op>
  void InclusiveScan(T (&input)[ITEMS], T (&output)[ITEMS], Op op,
                     T& block_aggregate) {
    const int t = emu_detail::LinearThread(kThreads, "BlockScan");
    T local = input[0];
    for (int k = 1; k < ITEMS; ++k) local = op(local, input[k]);
    storage_.partial[t] = local;
    __syncthreads();
    if (t == 0) {
      T run = storage_.partial[0];
      for (int i = 1; i < kThreads; ++i) {
        const T own = storage_.partial[i];
        storage_.partial[i] = run;
        run = op(run, own);
      }
      storage_.aggregate = run;
    }
    __syncthreads();
    T run = t == 0 ? input[0] : op(storage_.partial[t], input[0]);
    output[0] = run;
    for (int k = 1; k < ITEMS; ++k) output[k] = run = op(run, input[k]);
    block_aggregate = storage_.aggregate;
  }

  template <int ITEMS>
  void InclusiveSum(T (&input)[ITEMS], T (&output)[ITEMS], T& block_aggregate) {
    InclusiveScan(input, output, cub::Sum(), block_aggregate);
  }

  template <int ITEMS>
  void InclusiveSum(T (&input)[ITEMS], T (&output)[ITEMS]) {
    T aggregate;
    InclusiveSum(input, output, aggregate);
  }

  void InclusiveSum(T input, T& output, T& block_aggregate) {
    T in[1] = {input}, out[1];
    InclusiveSum(in, out, block_aggregate);
    output = out[0];
  }

  void InclusiveSum(T input, T& output) {
    T aggregate;
    InclusiveSum(input, output, aggregate);
  }

 private:
  TempStorage& storage_;
};

namespace emu_detail {

// CUB's radix order of a key as unsigned bits: unsigned integers as they
// are, the sign bit flipped for signed integers, and floats mapped so that
// the order of the bits is the order of the values. -0 takes +0's bits
// first, since CUB sorts the two zeros as equal (stably, in input order;
// ProcessFloatMinusZero in cub/block/radix_rank_sort_operations.cuh).
template <class K>
auto RadixBits(K key) {
  static_assert(std::is_arithmetic_v<K>, "radix sort keys are arithmetic");
  using U = std::conditional_t<
      sizeof(K) == 1, uint8_t,
      std::conditional_t<
          sizeof(K) == 2, uint16_t,
          std::conditional_t<sizeof(K) == 4, uint32_t, uint64_t>>>;
  U bits;
  std::memcpy(&bits, &key, sizeof(K));
  constexpr U kSign = static_cast<U>(U{1} << (sizeof(U) * 8 - 1));
  if constexpr (std::is_floating_point_v<K>) {
    if (bits == kSign) bits = 0;
    bits =
        (bits & kSign) ? static_cast<U>(~bits) : static_cast<U>(bits ^ kSign);
  } else if constexpr (std::is_signed_v<K>) {
    bits = static_cast<U>(bits ^ kSign);
  }
  return bits;
}

// The temp storage the stand-in asks for: a token amount, so that callers'
// layouts are exercised with a nonzero size.
inline size_t TempBytes(int num_segments) {
  return 256 + static_cast<size_t>(std::max(num_segments, 0)) * 8;
}

// Sorts each segment [begin[s], end[s]) of keys_in (and values_in, unless
// null) into the same positions of keys_out (values_out), stably by the key
// bits [begin_bit, end_bit). Positions outside every segment are left as
// they are in the outputs, as CUB leaves them.
template <class K, class V, class BeginIt, class EndIt>
cudaError_t SortSegments(void* temp, size_t& temp_bytes, const K* keys_in,
                         K* keys_out, const V* values_in, V* values_out,
                         int num_items, int num_segments, BeginIt begin,
                         EndIt end, int begin_bit, int end_bit,
                         bool descending) {
  if (temp == nullptr) {
    temp_bytes = TempBytes(num_segments);
    return cudaSuccess;
  }
  if (temp_bytes < TempBytes(num_segments) || num_items < 0 || begin_bit < 0 ||
      end_bit > static_cast<int>(sizeof(K) * 8) || begin_bit > end_bit) {
    return cudaErrorInvalidValue;
  }
  using U = decltype(RadixBits(K{}));
  const int width = end_bit - begin_bit;
  const U mask = width >= static_cast<int>(sizeof(U) * 8)
                     ? static_cast<U>(~U{0})
                     : static_cast<U>((U{1} << width) - 1);
  const auto digit = [&](const K& k) {
    return static_cast<U>((RadixBits(k) >> begin_bit) & mask);
  };
  struct Item {
    K key;
    V value;
  };
  std::vector<Item> items;
  for (int s = 0; s < num_segments; ++s) {
    const int64_t first = begin[s];
    const int64_t last = end[s];
    if (last <= first) continue;
    items.clear();
    for (int64_t i = first; i < last; ++i) {
      items.push_back(Item{keys_in[i], values_in ? values_in[i] : V{}});
    }
    std::stable_sort(items.begin(), items.end(),
                     [&](const Item& a, const Item& b) {
                       return descending ? digit(b.key) < digit(a.key)
                                         : digit(a.key) < digit(b.key);
                     });
    for (int64_t i = first; i < last; ++i) {
      keys_out[i] = items[static_cast<size_t>(i - first)].key;
      if (values_out)
        values_out[i] = items[static_cast<size_t>(i - first)].value;
    }
  }
  return cudaSuccess;
}

// The double-buffer form: sorts Current() into Alternate() and flips the
// selector, so the result is in Current() as CUB promises.
template <class K, class V, class BeginIt, class EndIt>
cudaError_t SortSegmentsBuffered(void* temp, size_t& temp_bytes,
                                 DoubleBuffer<K>& keys, DoubleBuffer<V>* values,
                                 int num_items, int num_segments, BeginIt begin,
                                 EndIt end, int begin_bit, int end_bit,
                                 bool descending) {
  const cudaError_t e = SortSegments<K, V>(
      temp, temp_bytes, keys.Current(), keys.Alternate(),
      values ? values->Current() : nullptr,
      values ? values->Alternate() : nullptr, num_items, num_segments, begin,
      end, begin_bit, end_bit, descending);
  if (e != cudaSuccess || temp == nullptr) return e;
  keys.selector ^= 1;
  if (values) values->selector ^= 1;
  return cudaSuccess;
}

// One segment over all items, for DeviceRadixSort.
struct Whole {
  int n;
  int operator[](int) const { return n; }
};
struct Zero {
  int operator[](int) const { return 0; }
};

}  // namespace emu_detail

struct DeviceSegmentedRadixSort {
  template <class K, class BeginIt, class EndIt>
  static cudaError_t SortKeys(void* temp, size_t& temp_bytes, const K* keys_in,
                              K* keys_out, int num_items, int num_segments,
                              BeginIt begin, EndIt end, int begin_bit = 0,
                              int end_bit = sizeof(K) * 8,
                              cudaStream_t /*stream*/ = 0) {
    return emu_detail::SortSegments<K, NullType>(
        temp, temp_bytes, keys_in, keys_out, nullptr, nullptr, num_items,
        num_segments, begin, end, begin_bit, end_bit, false);
  }

  template <class K, class BeginIt, class EndIt>
  static cudaError_t SortKeys(void* temp, size_t& temp_bytes,
                              DoubleBuffer<K>& keys, int num_items,
                              int num_segments, BeginIt begin, EndIt end,
                              int begin_bit = 0, int end_bit = sizeof(K) * 8,
                              cudaStream_t /*stream*/ = 0) {
    return emu_detail::SortSegmentsBuffered<K, NullType>(
        temp, temp_bytes, keys, nullptr, num_items, num_segments, begin, end,
        begin_bit, end_bit, false);
  }

  template <class K, class BeginIt, class EndIt>
  static cudaError_t SortKeysDescending(void* temp, size_t& temp_bytes,
                                        const K* keys_in, K* keys_out,
                                        int num_items, int num_segments,
                                        BeginIt begin, EndIt end,
                                        int begin_bit = 0,
                                        int end_bit = sizeof(K) * 8,
                                        cudaStream_t /*stream*/ = 0) {
    return emu_detail::SortSegments<K, NullType>(
        temp, temp_bytes, keys_in, keys_out, nullptr, nullptr, num_items,
        num_segments, begin, end, begin_bit, end_bit, true);
  }

  template <class K, class BeginIt, class EndIt>
  static cudaError_t SortKeysDescending(void* temp, size_t& temp_bytes,
                                        DoubleBuffer<K>& keys, int num_items,
                                        int num_segments, BeginIt begin,
                                        EndIt end, int begin_bit = 0,
                                        int end_bit = sizeof(K) * 8,
                                        cudaStream_t /*stream*/ = 0) {
    return emu_detail::SortSegmentsBuffered<K, NullType>(
        temp, temp_bytes, keys, nullptr, num_items, num_segments, begin, end,
        begin_bit, end_bit, true);
  }

  template <class K, class V, class BeginIt, class EndIt>
  static cudaError_t SortPairs(void* temp, size_t& temp_bytes, const K* keys_in,
                               K* keys_out, const V* values_in, V* values_out,
                               int num_items, int num_segments, BeginIt begin,
                               EndIt end, int begin_bit = 0,
                               int end_bit = sizeof(K) * 8,
                               cudaStream_t /*stream*/ = 0) {
    return emu_detail::SortSegments<K, V>(
        temp, temp_bytes, keys_in, keys_out, values_in, values_out, num_items,
        num_segments, begin, end, begin_bit, end_bit, false);
  }

  template <class K, class V, class BeginIt, class EndIt>
  static cudaError_t SortPairs(void* temp, size_t& temp_bytes,
                               DoubleBuffer<K>& keys, DoubleBuffer<V>& values,
                               int num_items, int num_segments, BeginIt begin,
                               EndIt end, int begin_bit = 0,
                               int end_bit = sizeof(K) * 8,
                               cudaStream_t /*stream*/ = 0) {
    return emu_detail::SortSegmentsBuffered<K, V>(
        temp, temp_bytes, keys, &values, num_items, num_segments, begin, end,
        begin_bit, end_bit, false);
  }

  template <class K, class V, class BeginIt, class EndIt>
  static cudaError_t SortPairsDescending(
      void* temp, size_t& temp_bytes, const K* keys_in, K* keys_out,
      const V* values_in, V* values_out, int num_items, int num_segments,
      BeginIt begin, EndIt end, int begin_bit = 0, int end_bit = sizeof(K) * 8,
      cudaStream_t /*stream*/ = 0) {
    return emu_detail::SortSegments<K, V>(
        temp, temp_bytes, keys_in, keys_out, values_in, values_out, num_items,
        num_segments, begin, end, begin_bit, end_bit, true);
  }

  template <class K, class V, class BeginIt, class EndIt>
  static cudaError_t SortPairsDescending(void* temp, size_t& temp_bytes,
                                         DoubleBuffer<K>& keys,
                                         DoubleBuffer<V>& values, int num_items,
                                         int num_segments, BeginIt begin,
                                         EndIt end, int begin_bit = 0,
                                         int end_bit = sizeof(K) * 8,
                                         cudaStream_t /*stream*/ = 0) {
    return emu_detail::SortSegmentsBuffered<K, V>(
        temp, temp_bytes, keys, &values, num_items, num_segments, begin, end,
        begin_bit, end_bit, true);
  }
};

struct DeviceRadixSort {
  template <class K>
  static cudaError_t SortKeys(void* temp, size_t& temp_bytes, const K* keys_in,
                              K* keys_out, int num_items, int begin_bit = 0,
                              int end_bit = sizeof(K) * 8,
                              cudaStream_t stream = 0) {
    return DeviceSegmentedRadixSort::SortKeys(
        temp, temp_bytes, keys_in, keys_out, num_items, 1, emu_detail::Zero{},
        emu_detail::Whole{num_items}, begin_bit, end_bit, stream);
  }

  template <class K>
  static cudaError_t SortKeysDescending(void* temp, size_t& temp_bytes,
                                        const K* keys_in, K* keys_out,
                                        int num_items, int begin_bit = 0,
                                        int end_bit = sizeof(K) * 8,
                                        cudaStream_t stream = 0) {
    return DeviceSegmentedRadixSort::SortKeysDescending(
        temp, temp_bytes, keys_in, keys_out, num_items, 1, emu_detail::Zero{},
        emu_detail::Whole{num_items}, begin_bit, end_bit, stream);
  }

  template <class K, class V>
  static cudaError_t SortPairs(void* temp, size_t& temp_bytes, const K* keys_in,
                               K* keys_out, const V* values_in, V* values_out,
                               int num_items, int begin_bit = 0,
                               int end_bit = sizeof(K) * 8,
                               cudaStream_t stream = 0) {
    return DeviceSegmentedRadixSort::SortPairs(
        temp, temp_bytes, keys_in, keys_out, values_in, values_out, num_items,
        1, emu_detail::Zero{}, emu_detail::Whole{num_items}, begin_bit, end_bit,
        stream);
  }

  template <class K, class V>
  static cudaError_t SortPairsDescending(void* temp, size_t& temp_bytes,
                                         const K* keys_in, K* keys_out,
                                         const V* values_in, V* values_out,
                                         int num_items, int begin_bit = 0,
                                         int end_bit = sizeof(K) * 8,
                                         cudaStream_t stream = 0) {
    return DeviceSegmentedRadixSort::SortPairsDescending(
        temp, temp_bytes, keys_in, keys_out, values_in, values_out, num_items,
        1, emu_detail::Zero{}, emu_detail::Whole{num_items}, begin_bit, end_bit,
        stream);
  }
};

}  // namespace cub

#endif  // SEQBOAT_TOOLS_CUDA_EMU_CUB_EMULATION_H_
