// The CUDA emulation itself, on small kernels written here rather than the
// real kernels/*.cu files: what those rely on (barriers ordering shared
// memory, shuffles, the block and grid indices, the two kinds of shared
// memory), the aborts that stand in for a GPU's hangs and undefined
// behaviour, the launches the hardware refuses, and the CUB stand-in's sorts
// including the key types and variants the sampling kernels do not use.
//
// Included first, as emulation.bzl prepends it to the .cu files, so that the
// CUDA keywords below mean what they mean there.
#include "tools/cuda_emu/cuda_emulation.h"
// clang-format off
#include "kernels/cuda/launch.cuh"
// clang-format on

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "gtest/gtest.h"

namespace seqboat::emu {
namespace {

// --- correct behaviour -------------------------------------------------------

// Each thread reads its neighbours' writes after the barrier, then the
// array is rewritten and read again: without the barriers the emulation
// (which runs a thread until its next sync point) would show stale values.
__global__ void NeighbourKernel(int* out) {
  __shared__ int s[256];
  const int t = threadIdx.x, n = blockDim.x;
  s[t] = 3 * t + 1;
  __syncthreads();
  const int right = s[(t + 1) % n];
  __syncthreads();
  s[t] = -t;
  __syncthreads();
  out[t] = right + 1000 * s[(t + n - 1) % n];
}

TEST(EmulatorTest, SyncthreadsOrdersSharedMemory) {
  const int n = 256;
  std::vector<int> out(n, 0);
  SEQBOAT_LAUNCH(1, n, 0, nullptr, NeighbourKernel)(out.data());
  ASSERT_EQ(cudaGetLastError(), cudaSuccess);
  for (int t = 0; t < n; ++t) {
    EXPECT_EQ(out[t], 3 * ((t + 1) % n) + 1 - 1000 * ((t + n - 1) % n)) << t;
  }
}

// Every lane ends with its warp's total after log2(32) xor steps.
__global__ void ButterflyKernel(long long* out) {
  const int t = threadIdx.x;
  long long v = static_cast<long long>(t) * t + 1;
  for (int m = warpSize / 2; m > 0; m /= 2) {
    v += __shfl_xor_sync(0xffffffffu, v, m);
  }
  out[t] = v;
}

TEST(EmulatorTest, XorButterflyGivesEveryLaneTheTotal) {
  const int n = 96;  // three warps, each with its own total
  std::vector<long long> out(n, 0);
  SEQBOAT_LAUNCH(1, n, 0, nullptr, ButterflyKernel)(out.data());
  ASSERT_EQ(cudaGetLastError(), cudaSuccess);
  for (int t = 0; t < n; ++t) {
    long long total = 0;
    for (int l = t / 32 * 32; l < t / 32 * 32 + 32; ++l)
      total += 1LL * l * l + 1;
    EXPECT_EQ(out[t], total) << t;
  }
}

// Counts each (block, thread) pair's global linear index and records the
// dimensions each thread saw.
__global__ void CoverKernel(int* count, int* dims_ok) {
  const unsigned block =
      blockIdx.x + gridDim.x * (blockIdx.y + gridDim.y * blockIdx.z);
  const unsigned thread =
      threadIdx.x + blockDim.x * (threadIdx.y + blockDim.y * threadIdx.z);
  const unsigned per_block = blockDim.x * blockDim.y * blockDim.z;
  atomicAdd(&count[block * per_block + thread], 1);
  const bool ok = gridDim.x == 3 && gridDim.y == 2 && gridDim.z == 2 &&
                  blockDim.x == 4 && blockDim.y == 3 && blockDim.z == 2 &&
                  blockIdx.x < 3 && blockIdx.y < 2 && blockIdx.z < 2 &&
                  threadIdx.x < 4 && threadIdx.y < 3 && threadIdx.z < 2;
  if (!ok) atomicAdd(dims_ok, 1);
}

TEST(EmulatorTest, IndicesCoverTheGridOnce) {
  const dim3 grid(3, 2, 2), block(4, 3, 2);
  std::vector<int> count(3 * 2 * 2 * 4 * 3 * 2, 0);
  int bad = 0;
  SEQBOAT_LAUNCH(grid, block, 0, nullptr, CoverKernel)(count.data(), &bad);
  ASSERT_EQ(cudaGetLastError(), cudaSuccess);
  EXPECT_EQ(bad, 0);
  for (size_t i = 0; i < count.size(); ++i) EXPECT_EQ(count[i], 1) << i;
}

// Thread 0 reports what the previous block left in the kernel's static
// shared array and where that array lives.
__global__ void StaticSharedA(int* left, const void** where) {
  __shared__ int s[4];
  if (threadIdx.x == 0) {
    left[blockIdx.x] = s[0];
    s[0] = 100 + static_cast<int>(blockIdx.x);
    *where = s;
  }
}

__global__ void StaticSharedB(int* left, const void** where) {
  __shared__ int s[4];
  if (threadIdx.x == 0) {
    left[blockIdx.x] = s[0];
    s[0] = 200 + static_cast<int>(blockIdx.x);
    *where = s;
  }
}

TEST(EmulatorTest, StaticSharedIsPerKernelAndReusedAcrossBlocks) {
  std::vector<int> left(4, -1);
  const void* a1 = nullptr;
  const void* a2 = nullptr;
  const void* b = nullptr;
  SEQBOAT_LAUNCH(4, 32, 0, nullptr, StaticSharedA)(left.data(), &a1);
  // Blocks run one after another on the one copy, so each block sees the
  // previous one's write (a GPU gives no such guarantee; kernels must not
  // rely on it, and the emulation makes that reuse visible).
  for (int blk = 1; blk < 4; ++blk) EXPECT_EQ(left[blk], 99 + blk) << blk;
  SEQBOAT_LAUNCH(4, 32, 0, nullptr, StaticSharedB)(left.data(), &b);
  EXPECT_NE(left[0], 103) << "kernel B saw kernel A's shared array";
  SEQBOAT_LAUNCH(4, 32, 0, nullptr, StaticSharedA)(left.data(), &a2);
  EXPECT_EQ(left[0], 103) << "the array is one copy across launches";
  ASSERT_EQ(cudaGetLastError(), cudaSuccess);
  EXPECT_EQ(a1, a2);
  EXPECT_NE(a1, b);
}

// Each thread checks its slot of the dynamic array is all 0xff bytes, then
// dirties it for the next block.
__global__ void DynamicFillKernel(int* fresh, int per_thread) {
  SEQBOAT_DYNAMIC_SHARED(float, dyn);
  const int t = threadIdx.x;
  bool ok = true;
  for (int i = 0; i < per_thread; ++i) {
    const float v = dyn[t * per_thread + i];
    ok = ok && std::isnan(v) && __float_as_uint(v) == 0xffffffffu;
  }
  __syncthreads();
  for (int i = 0; i < per_thread; ++i) dyn[t * per_thread + i] = 1.0f;
  fresh[blockIdx.x * blockDim.x + t] = ok;
}

TEST(EmulatorTest, DynamicSharedStartsNanFilledEachBlock) {
  const int blocks = 3, threads = 64;
  for (int per_thread : {1, 8}) {
    std::vector<int> fresh(blocks * threads, 0);
    SEQBOAT_LAUNCH(blocks, threads, threads * per_thread * sizeof(float),
                   nullptr, DynamicFillKernel)
    (fresh.data(), per_thread);
    ASSERT_EQ(cudaGetLastError(), cudaSuccess);
    for (int i = 0; i < blocks * threads; ++i) {
      EXPECT_EQ(fresh[i], 1) << "per_thread " << per_thread << " at " << i;
    }
  }
}

// --- misuse aborts, naming the block and thread
// -------------------------------

// In block 2 only, thread 0 skips the barrier and waits in a shuffle its
// warp's other lanes never reach: on a GPU, a hang.
__global__ void SkippedBarrierKernel(int* out) {
  int v = threadIdx.x;
  if (blockIdx.x != 2 || threadIdx.x != 0) __syncthreads();
  v = __shfl_xor_sync(0xffffffffu, v, 1);
  out[threadIdx.x] = v;
}

__global__ void PartialWarpShuffleKernel(int* out) {
  out[threadIdx.x] =
      __shfl_xor_sync(0xffffffffu, static_cast<int>(threadIdx.x), 1);
}

__global__ void ShuffleAfterExitKernel(int* out) {
  if (blockIdx.x == 1 && threadIdx.x == 7) return;
  out[threadIdx.x] =
      __shfl_xor_sync(0xffffffffu, static_cast<int>(threadIdx.x), 1);
}

TEST(EmulatorDeathTest, SkippedSyncthreadsIsADeadlock) {
  std::vector<int> out(32);
  EXPECT_DEATH(
      SEQBOAT_LAUNCH(3, 32, 0, nullptr, SkippedBarrierKernel)(out.data()),
      "deadlock.*block \\(2, 0, 0\\), thread \\(0, 0, 0\\)");
}

TEST(EmulatorDeathTest, FullMaskShuffleInAPartialWarp) {
  std::vector<int> out(48);
  // Warp 0 is whole; warp 1's first lane is the first to find 16 lanes.
  EXPECT_DEATH(
      SEQBOAT_LAUNCH(1, 48, 0, nullptr, PartialWarpShuffleKernel)(out.data()),
      "__shfl_xor_sync with a full mask in a warp of 16 live lanes.*"
      "block \\(0, 0, 0\\), thread \\(32, 0, 0\\)");
}

TEST(EmulatorDeathTest, ShuffleAfterALaneReturned) {
  std::vector<int> out(32);
  EXPECT_DEATH(
      SEQBOAT_LAUNCH(2, 32, 0, nullptr, ShuffleAfterExitKernel)(out.data()),
      "a lane returned while its warp waits.*"
      "block \\(1, 0, 0\\), thread \\(7, 0, 0\\)");
}

// --- early launches -------------------------------------------------------

// Streams its row of `w` into L2 before waiting, as an early GEMV does.
__global__ void EarlyRowKernel(const float* w, int cols, float* out) {
  if (threadIdx.x == 0) {
    PrefetchL2(w + blockIdx.x * cols, static_cast<uint32_t>(cols * 4));
  }
  WaitForPriorGrids();
  LetDependentsLaunch();
  out[blockIdx.x * blockDim.x + threadIdx.x] =
      w[blockIdx.x * cols + threadIdx.x];
}

__global__ void EarlyWithoutWaitKernel(float* out) {
  if (threadIdx.x != 3) WaitForPriorGrids();
  out[threadIdx.x] = 1.0f;
}

__global__ void MisalignedPrefetchKernel(const float* w) {
  PrefetchL2(w + 1, 16);
  WaitForPriorGrids();
}

TEST(EmulatorTest, EarlyLaunchesAreCountedAndTheirPrefetchesRecorded) {
  alignas(16) float w[4 * 8];
  std::iota(w, w + 32, 0.0f);
  std::vector<float> out(4 * 8);
  Emulation& s = State();
  s.prefetches.clear();
  const int64_t early = s.early_launches;
  SEQBOAT_LAUNCH_EARLY(4, 8, 0, nullptr, true, EarlyRowKernel)
  (w, 8, out.data());
  EXPECT_EQ(s.early_launches, early + 1);
  EXPECT_EQ(out, std::vector<float>(w, w + 32));
  ASSERT_EQ(s.prefetches.size(), 4u);
  for (int b = 0; b < 4; ++b) {
    EXPECT_EQ(s.prefetches[b].at, w + 8 * b);
    EXPECT_EQ(s.prefetches[b].bytes, 32u);
  }
  // Not early: the same kernel is an ordinary launch.
  SEQBOAT_LAUNCH_EARLY(4, 8, 0, nullptr, false, EarlyRowKernel)
  (w, 8, out.data());
  EXPECT_EQ(s.early_launches, early + 1);
}

TEST(EmulatorDeathTest, EarlyLaunchWithoutWaitingAborts) {
  std::vector<float> out(32);
  EXPECT_DEATH(SEQBOAT_LAUNCH_EARLY(1, 32, 0, nullptr, true,
                                    EarlyWithoutWaitKernel)(out.data()),
               "early launch returned without WaitForPriorGrids.*"
               "thread \\(3, 0, 0\\)");
}

// launch_queue.h's shape, without its CUDA runtime header.
struct Queue {
  cudaStream_t stream;
  bool early;
};

// A kernel on a queue may be launched early on a GPU, so its waits are
// checked even where this launch is not early, and only an early one counts.
TEST(EmulatorDeathTest, LaunchOnAQueueWithoutWaitingAbortsEarlyOrNot) {
  alignas(16) float w[32] = {};
  std::vector<float> out(32);
  const int64_t early = State().early_launches;
  SEQBOAT_LAUNCH_ON(1, 32, 0, (Queue{nullptr, false}), EarlyRowKernel)
  (w, 32, out.data());
  EXPECT_EQ(State().early_launches, early);
  SEQBOAT_LAUNCH_ON(1, 32, 0, (Queue{nullptr, true}), EarlyRowKernel)
  (w, 32, out.data());
  EXPECT_EQ(State().early_launches, early + 1);
  for (const bool is_early : {false, true}) {
    EXPECT_DEATH(SEQBOAT_LAUNCH_ON(1, 32, 0, (Queue{nullptr, is_early}),
                                   EarlyWithoutWaitKernel)(out.data()),
                 "launch on a LaunchQueue returned without WaitForPriorGrids"
                 ".*thread \\(3, 0, 0\\)")
        << "early " << is_early;
  }
  // A plain launch is not checked.
  SEQBOAT_LAUNCH(1, 32, 0, nullptr, EarlyWithoutWaitKernel)(out.data());
}

TEST(EmulatorDeathTest, MisalignedPrefetchAborts) {
  alignas(16) float w[8] = {};
  EXPECT_DEATH(SEQBOAT_LAUNCH(1, 1, 0, nullptr, MisalignedPrefetchKernel)(w),
               "PrefetchL2 of 16 bytes at an address 4 bytes past");
}

// --- refused launches -------------------------------------------------------

__global__ void MarkKernel(int* ran) { atomicAdd(ran, 1); }

__global__ void BigSharedKernel(int* ran) {
  SEQBOAT_DYNAMIC_SHARED(char, dyn);
  // Touches the last byte, which must exist.
  if (threadIdx.x == 0 && dyn[64 * 1024 - 1] == static_cast<char>(0xff))
    atomicAdd(ran, 1);
}

TEST(EmulatorTest, RefusedLaunchesRunNothingAndSetTheLastError) {
  TakeFailures();
  int ran = 0;
  SEQBOAT_LAUNCH(1, 1025, 0, nullptr, MarkKernel)(&ran);
  EXPECT_EQ(ran, 0);
  EXPECT_EQ(cudaPeekAtLastError(), cudaErrorInvalidConfiguration);
  EXPECT_EQ(cudaGetLastError(), cudaErrorInvalidConfiguration);
  EXPECT_EQ(cudaGetLastError(), cudaSuccess) << "reading clears the error";

  SEQBOAT_LAUNCH(1, 1024, 0, nullptr, MarkKernel)(&ran);
  EXPECT_EQ(ran, 1024);
  EXPECT_EQ(cudaGetLastError(), cudaSuccess);

  ran = 0;
  SEQBOAT_LAUNCH(dim3(1, 65536), 32, 0, nullptr, MarkKernel)(&ran);
  SEQBOAT_LAUNCH(0, 32, 0, nullptr, MarkKernel)(&ran);
  EXPECT_EQ(ran, 0);
  EXPECT_EQ(cudaGetLastError(), cudaErrorInvalidConfiguration);

  // Above 48 KiB only once the kernel's limit was raised, and never above
  // 227 KiB.
  SEQBOAT_LAUNCH(1, 32, 64 * 1024, nullptr, BigSharedKernel)(&ran);
  EXPECT_EQ(ran, 0);
  EXPECT_EQ(cudaGetLastError(), cudaErrorInvalidValue);
  ASSERT_EQ(cudaFuncSetAttribute(BigSharedKernel,
                                 cudaFuncAttributeMaxDynamicSharedMemorySize,
                                 64 * 1024),
            cudaSuccess);
  SEQBOAT_LAUNCH(1, 32, 64 * 1024, nullptr, BigSharedKernel)(&ran);
  EXPECT_EQ(ran, 1);
  EXPECT_EQ(cudaGetLastError(), cudaSuccess);
  // Raising one kernel's limit leaves the others at 48 KiB.
  SEQBOAT_LAUNCH(1, 32, 64 * 1024, nullptr, MarkKernel)(&ran);
  EXPECT_EQ(ran, 1);
  EXPECT_EQ(cudaGetLastError(), cudaErrorInvalidValue);

  cudaFuncSetAttribute(BigSharedKernel,
                       cudaFuncAttributeMaxDynamicSharedMemorySize, 300 * 1024);
  SEQBOAT_LAUNCH(1, 32, 300 * 1024, nullptr, BigSharedKernel)(&ran);
  EXPECT_EQ(ran, 1);
  EXPECT_EQ(cudaGetLastError(), cudaErrorInvalidValue);

  const std::string failures = TakeFailures();
  EXPECT_NE(
      failures.find("launch of MarkKernel refused: block of 1025 x 1 x 1"),
      std::string::npos)
      << failures;
  EXPECT_NE(failures.find("grid of 1 x 65536 x 1"), std::string::npos)
      << failures;
  EXPECT_NE(failures.find("307200 bytes of dynamic shared memory"),
            std::string::npos)
      << failures;
  EXPECT_EQ(TakeFailures(), "");
}

// --- the CUB stand-in -------------------------------------------------------

// CUB's documented radix order (cub/device/device_radix_sort.cuh): unsigned
// keys as they are, signed ones with the sign bit flipped, floats with the
// sign bit flipped when positive and all bits flipped when negative; -0 and
// +0 are equal; NaNs sort by their bits (-NaN first, +NaN last).
template <class K>
uint64_t CubOrder(K key) {
  uint64_t bits = 0;
  std::memcpy(&bits, &key, sizeof(K));
  const uint64_t sign = uint64_t{1} << (sizeof(K) * 8 - 1);
  const uint64_t all = sizeof(K) == 8 ? ~uint64_t{0} : (sign << 1) - 1;
  if constexpr (std::is_floating_point_v<K>) {
    if (bits == sign) bits = 0;  // -0 is +0
    bits = (bits & sign) ? (~bits & all) : (bits ^ sign);
  } else if constexpr (std::is_signed_v<K>) {
    bits ^= sign;
  }
  return bits;
}

// The expected result of sorting keys[first, last) (and the values along)
// by the bits [begin_bit, end_bit) of their radix order, stably.
template <class K, class V>
void ReferenceSort(std::vector<K>& keys, std::vector<V>& values, int first,
                   int last, int begin_bit, int end_bit, bool descending) {
  const int width = end_bit - begin_bit;
  const uint64_t mask = width >= 64 ? ~uint64_t{0} : (uint64_t{1} << width) - 1;
  std::vector<int> order(last - first);
  std::iota(order.begin(), order.end(), first);
  const auto digit = [&](int i) {
    return (CubOrder(keys[i]) >> begin_bit) & mask;
  };
  std::stable_sort(order.begin(), order.end(), [&](int a, int b) {
    return descending ? digit(b) < digit(a) : digit(a) < digit(b);
  });
  std::vector<K> k;
  std::vector<V> v;
  for (int i : order) {
    k.push_back(keys[i]);
    v.push_back(values[i]);
  }
  std::copy(k.begin(), k.end(), keys.begin() + first);
  std::copy(v.begin(), v.end(), values.begin() + first);
}

// Bit-for-bit, since NaN keys compare unequal to themselves.
template <class K>
void ExpectSameBits(const std::vector<K>& got, const std::vector<K>& want,
                    const std::string& what) {
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i) {
    EXPECT_EQ(std::memcmp(&got[i], &want[i], sizeof(K)), 0)
        << what << " at " << i << ": " << +got[i] << " vs " << +want[i];
  }
}

// DeviceRadixSort::SortPairs or SortPairsDescending through the size query,
// checked against the reference; also SortKeys on the same input.
template <class K>
void CheckWholeSort(const std::vector<K>& keys, int begin_bit, int end_bit,
                    const std::string& what) {
  const int n = static_cast<int>(keys.size());
  std::vector<int> values(n);
  std::iota(values.begin(), values.end(), 0);
  for (bool descending : {false, true}) {
    const std::string name = what + (descending ? " descending" : "");
    std::vector<K> want_keys = keys;
    std::vector<int> want_values = values;
    ReferenceSort(want_keys, want_values, 0, n, begin_bit, end_bit, descending);

    std::vector<K> out_keys(n);
    std::vector<int> out_values(n, -1);
    size_t bytes = 0;
    const auto pairs = [&](void* temp) {
      return descending
                 ? cub::DeviceRadixSort::SortPairsDescending(
                       temp, bytes, keys.data(), out_keys.data(), values.data(),
                       out_values.data(), n, begin_bit, end_bit)
                 : cub::DeviceRadixSort::SortPairs(
                       temp, bytes, keys.data(), out_keys.data(), values.data(),
                       out_values.data(), n, begin_bit, end_bit);
    };
    ASSERT_EQ(pairs(nullptr), cudaSuccess);
    ASSERT_GT(bytes, 0u) << "the size query returns the temp size";
    EXPECT_EQ(out_values, std::vector<int>(n, -1)) << "the query sorts nothing";
    std::vector<char> temp(bytes);
    ASSERT_EQ(pairs(temp.data()), cudaSuccess);
    ExpectSameBits(out_keys, want_keys, name + " SortPairs keys");
    EXPECT_EQ(out_values, want_values) << name << " SortPairs values";

    std::vector<K> only_keys(n);
    const cudaError_t e = descending
                              ? cub::DeviceRadixSort::SortKeysDescending(
                                    temp.data(), bytes, keys.data(),
                                    only_keys.data(), n, begin_bit, end_bit)
                              : cub::DeviceRadixSort::SortKeys(
                                    temp.data(), bytes, keys.data(),
                                    only_keys.data(), n, begin_bit, end_bit);
    ASSERT_EQ(e, cudaSuccess);
    ExpectSameBits(only_keys, want_keys, name + " SortKeys");
  }
}

TEST(CubEmulationTest, SignedIntKeys) {
  std::mt19937 gen(7);
  std::uniform_int_distribution<int32_t> small(-50, 50);
  std::vector<int32_t> keys(300);
  for (auto& k : keys) k = small(gen);  // many duplicates: stability shows
  keys[3] = std::numeric_limits<int32_t>::min();
  keys[9] = std::numeric_limits<int32_t>::max();
  keys[17] = -1;
  CheckWholeSort(keys, 0, 32, "int32");
  // Only the low byte of the sign-flipped bits.
  CheckWholeSort(keys, 0, 8, "int32 bits [0, 8)");
}

TEST(CubEmulationTest, FloatKeysInCubOrder) {
  const float inf = std::numeric_limits<float>::infinity();
  const float nan = std::numeric_limits<float>::quiet_NaN();
  std::vector<float> keys = {0.0f,  -0.0f, 1.5f, -inf,   nan,     -1.5f, inf,
                             -0.0f, 0.0f,  -nan, 1e-45f, -1e-45f, -0.0f, 2.0f,
                             -inf,  0.0f,  nan,  -2.0f,  1.5f};
  std::mt19937 gen(11);
  std::normal_distribution<float> normal(0.0f, 3.0f);
  for (int i = 0; i < 100; ++i) keys.push_back(normal(gen));
  CheckWholeSort(keys, 0, 32, "float");

  // Spelled out for the specials: -NaN, -inf, ..., then the zeros in their
  // input order (CUB treats -0 and +0 as equal), ..., inf, NaN.
  const std::vector<float> specials = {0.0f, -0.0f, nan,   -inf,
                                       inf,  -nan,  -0.0f, 0.0f};
  std::vector<float> out(specials.size());
  std::vector<char> temp(4096);
  size_t bytes = temp.size();
  ASSERT_EQ(cub::DeviceRadixSort::SortKeys(temp.data(), bytes, specials.data(),
                                           out.data(),
                                           static_cast<int>(specials.size())),
            cudaSuccess);
  const std::vector<float> want = {-nan,  -inf, 0.0f, -0.0f,
                                   -0.0f, 0.0f, inf,  nan};
  ExpectSameBits(out, want, "float specials");
}

TEST(CubEmulationTest, Uint64KeysInABitRange) {
  std::mt19937_64 gen(3);
  std::vector<uint64_t> keys(200);
  for (auto& k : keys) k = gen();
  for (int i = 0; i < 20; ++i) keys[i * 7] = keys[i];  // duplicates
  CheckWholeSort(keys, 0, 64, "uint64");
  CheckWholeSort(keys, 13, 41, "uint64 bits [13, 41)");
  CheckWholeSort(keys, 60, 64, "uint64 bits [60, 64)");
}

TEST(CubEmulationTest, SegmentsSortApartAndGapsStayUntouched) {
  std::mt19937 gen(5);
  std::uniform_int_distribution<int32_t> dist(-20, 20);
  const int n = 40;
  std::vector<int32_t> keys(n);
  for (auto& k : keys) k = dist(gen);
  std::vector<int> values(n);
  std::iota(values.begin(), values.end(), 0);
  // [0, 9), an empty segment, a gap [9, 12) no segment covers, [12, 30),
  // [30, 40).
  const std::vector<int> begin = {0, 9, 12, 30};
  const std::vector<int> end = {9, 9, 30, 40};
  for (bool descending : {false, true}) {
    std::vector<int32_t> want_keys = keys;
    std::vector<int> want_values = values;
    for (size_t s = 0; s < begin.size(); ++s) {
      ReferenceSort(want_keys, want_values, begin[s], end[s], 0, 32,
                    descending);
    }
    std::vector<int32_t> out_keys(n, 777);
    std::vector<int> out_values(n, -1);
    for (int i = 9; i < 12; ++i) {
      want_keys[i] = 777;
      want_values[i] = -1;
    }
    size_t bytes = 0;
    const auto sort = [&](void* temp) {
      return descending
                 ? cub::DeviceSegmentedRadixSort::SortPairsDescending(
                       temp, bytes, keys.data(), out_keys.data(), values.data(),
                       out_values.data(), n, 4, begin.data(), end.data())
                 : cub::DeviceSegmentedRadixSort::SortPairs(
                       temp, bytes, keys.data(), out_keys.data(), values.data(),
                       out_values.data(), n, 4, begin.data(), end.data());
    };
    ASSERT_EQ(sort(nullptr), cudaSuccess);
    ASSERT_GT(bytes, 0u);
    std::vector<char> temp(bytes);
    // A buffer smaller than asked for is refused.
    size_t short_bytes = bytes - 1;
    EXPECT_EQ(cub::DeviceSegmentedRadixSort::SortKeys(
                  temp.data(), short_bytes, keys.data(), out_keys.data(), n, 4,
                  begin.data(), end.data()),
              cudaErrorInvalidValue);
    ASSERT_EQ(sort(temp.data()), cudaSuccess);
    EXPECT_EQ(out_keys, want_keys) << "descending " << descending;
    EXPECT_EQ(out_values, want_values) << "descending " << descending;

    // The whole-array sort differs: it mixes the segments.
    std::vector<int32_t> whole_keys = keys;
    std::vector<int> whole_values = values;
    ReferenceSort(whole_keys, whole_values, 0, n, 0, 32, descending);
    EXPECT_NE(whole_keys, want_keys);
  }
}

TEST(CubEmulationTest, DoubleBufferFlipsTheSelector) {
  std::vector<float> k0 = {3.0f, -1.0f, 2.0f, -1.0f, 0.5f, -0.0f, 0.0f};
  const int n = static_cast<int>(k0.size());
  std::vector<float> k1(n, 99.0f);
  std::vector<int> v0(n), v1(n, -1);
  std::iota(v0.begin(), v0.end(), 0);
  std::vector<float> want_keys = k0;
  std::vector<int> want_values = v0;
  ReferenceSort(want_keys, want_values, 0, n, 0, 32, false);

  cub::DoubleBuffer<float> keys(k0.data(), k1.data());
  cub::DoubleBuffer<int> values(v0.data(), v1.data());
  const int begin[] = {0}, end[] = {n};
  size_t bytes = 0;
  ASSERT_EQ(cub::DeviceSegmentedRadixSort::SortPairs(nullptr, bytes, keys,
                                                     values, n, 1, begin, end),
            cudaSuccess);
  EXPECT_EQ(keys.selector, 0) << "the size query leaves the buffers";
  std::vector<char> temp(bytes);
  ASSERT_EQ(cub::DeviceSegmentedRadixSort::SortPairs(temp.data(), bytes, keys,
                                                     values, n, 1, begin, end),
            cudaSuccess);
  EXPECT_EQ(keys.selector, 1);
  EXPECT_EQ(values.selector, 1);
  ASSERT_EQ(keys.Current(), k1.data());
  ASSERT_EQ(values.Current(), v1.data());
  ExpectSameBits(k1, want_keys, "DoubleBuffer keys");
  EXPECT_EQ(v1, want_values);

  // Keys only, descending, from the flipped state back into k0.
  std::vector<int> unused(n);
  ASSERT_EQ(cub::DeviceSegmentedRadixSort::SortKeysDescending(
                temp.data(), bytes, keys, n, 1, begin, end),
            cudaSuccess);
  EXPECT_EQ(keys.selector, 0);
  // Sorting the sorted keys stably keeps equal keys (the zeros) in their
  // sorted order, so compare with a descending sort of k1's contents.
  std::vector<float> want_again = want_keys;
  ReferenceSort(want_again, unused, 0, n, 0, 32, true);
  ExpectSameBits(k0, want_again, "DoubleBuffer descending");
}

}  // namespace
}  // namespace seqboat::emu
