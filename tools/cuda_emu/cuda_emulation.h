// CUDA C++ as plain C++: included first in every kernel translation unit
// that emulation.bzl makes from a kernels/*.cu file, so that the real
// kernel sources run on the CPU (emulator.h says what is and is not
// emulated). Provides the execution-space and shared-memory keywords,
// threadIdx / blockIdx / blockDim / gridDim, the barriers, warp shuffles and
// votes, the intrinsics the kernels call and no-op stand-ins for the runtime
// calls the .cu files make; kernels/launch.cuh turns launches into
// seqboat::emu::Launch; cub_emulation.h stands in for the CUB calls. Host
// types (dim3, float4, __half, __nv_bfloat16 and their conversions) are the
// CUDA headers' own host versions.
#ifndef SEQBOAT_TOOLS_CUDA_EMU_CUDA_EMULATION_H_
#define SEQBOAT_TOOLS_CUDA_EMU_CUDA_EMULATION_H_

#define SEQBOAT_CUDA_EMULATION 1

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime_api.h>
#include <math.h>
#include <vector_functions.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <functional>
#include <tuple>
#include <type_traits>
#include <utility>

#include "tools/cuda_emu/emulator.h"

// Execution spaces mean nothing on the host; __shared__ variables are one
// copy per kernel, which the blocks (run one at a time) take in turn.
#undef __global__
#undef __device__
#undef __host__
#undef __forceinline__
#undef __launch_bounds__
#undef __shared__
#undef __constant__
#define __global__
#define __device__
#define __host__
#define __forceinline__ inline
#define __launch_bounds__(...)
#define __shared__ static
#define __constant__ static

#define threadIdx (::seqboat::emu::State().thread_idx)
#define blockIdx (::seqboat::emu::State().block_idx)
#define blockDim (::seqboat::emu::State().block_dim)
#define gridDim (::seqboat::emu::State().grid_dim)
#define warpSize (::seqboat::emu::kWarpSize)

namespace seqboat::emu {

template <class T>
uint64_t ToBits(const T& v) {
  static_assert(sizeof(T) <= sizeof(uint64_t) &&
                std::is_trivially_copyable_v<T>);
  uint64_t bits = 0;
  std::memcpy(&bits, &v, sizeof(T));
  return bits;
}

template <class T>
T FromBits(uint64_t bits) {
  T v;
  std::memcpy(&v, &bits, sizeof(T));
  return v;
}

inline int LaneId() { return State().current % kWarpSize; }

// The lane a shuffle reads, or `lane` itself when the source lies outside
// the caller's width-lane segment (the hardware's rule).
inline int ShuffleSource(int lane, int src, int width) {
  const int base = lane & ~(width - 1);
  return src < base || src >= base + width ? lane : src;
}

template <class T>
T Shuffle(unsigned mask, T v, int width, int (*source)(int, int, int), int arg,
          const char* what) {
  const int lane = LaneId();
  const uint64_t* all = WarpExchange(mask, ToBits(v), what);
  return FromBits<T>(all[ShuffleSource(lane, source(lane, arg, width), width)]);
}

// Launch configuration and kernel; the call runs the grid (kernel arguments
// are copied once, converted to the kernel's parameter types, as CUDA does).
template <class... Params>
class KernelLaunch {
 public:
  KernelLaunch(const char* name, dim3 grid, dim3 block, size_t shared_bytes,
               void (*kernel)(Params...), bool early = false,
               bool must_wait = false)
      : name_(name),
        grid_(grid),
        block_(block),
        shared_(shared_bytes),
        kernel_(kernel),
        early_(early),
        must_wait_(must_wait) {}

  template <class... Args>
  void operator()(Args&&... args) const {
    const std::tuple<std::decay_t<Params>...> params(
        std::forward<Args>(args)...);
    const std::function<void()> body = [&] { std::apply(kernel_, params); };
    State().early = early_;
    State().must_wait = must_wait_;
    RunGrid(reinterpret_cast<const void*>(kernel_), name_, grid_, block_,
            shared_, body);
    State().early = false;
    State().must_wait = false;
  }

 private:
  const char* name_;
  dim3 grid_, block_;
  size_t shared_;
  void (*kernel_)(Params...);
  bool early_;
  bool must_wait_;
};

// `early`: launch.cuh's SEQBOAT_LAUNCH_EARLY. Launches run one after another
// here, so an early one only has its waits checked and is counted.
// `must_wait`: SEQBOAT_LAUNCH_ON, whose waits are checked early or not.
template <class... Params>
KernelLaunch<Params...> Launch(const char* name, dim3 grid, dim3 block,
                               size_t shared_bytes, cudaStream_t /*stream*/,
                               void (*kernel)(Params...), bool early = false,
                               bool must_wait = false) {
  return KernelLaunch<Params...>(name, grid, block, shared_bytes, kernel, early,
                                 must_wait);
}

template <class T>
T* DynamicShared() {
  return static_cast<T*>(DynamicSharedMemory());
}

template <class Kernel>
cudaError_t FuncSetAttribute(Kernel* kernel, cudaFuncAttribute attr,
                             int value) {
  if (attr == cudaFuncAttributeMaxDynamicSharedMemorySize) {
    State().max_dynamic_shared[reinterpret_cast<const void*>(kernel)] = value;
  }
  return cudaSuccess;
}

inline cudaError_t GetLastError() {
  Emulation& s = State();
  const cudaError_t e = s.last_error;
  s.last_error = cudaSuccess;
  return e;
}

inline cudaError_t PeekAtLastError() { return State().last_error; }

}  // namespace seqboat::emu

// Runtime calls of the .cu files (launches are synchronous here).
#define cudaFuncSetAttribute ::seqboat::emu::FuncSetAttribute
#define cudaGetLastError ::seqboat::emu::GetLastError
#define cudaPeekAtLastError ::seqboat::emu::PeekAtLastError

// --- barriers, shuffles, votes
// ------------------------------------------------

inline void __syncthreads() { ::seqboat::emu::SyncBlock(); }

inline void __syncwarp(unsigned mask = 0xffffffffu) {
  ::seqboat::emu::WarpExchange(mask, 0, "__syncwarp");
}

template <class T>
T __shfl_sync(unsigned mask, T v, int src_lane, int width = warpSize) {
  return ::seqboat::emu::Shuffle(
      mask, v, width,
      [](int lane, int src, int w) { return (lane & ~(w - 1)) + (src % w); },
      src_lane, "__shfl_sync");
}

template <class T>
T __shfl_xor_sync(unsigned mask, T v, int lane_mask, int width = warpSize) {
  return ::seqboat::emu::Shuffle(
      mask, v, width, [](int lane, int m, int) { return lane ^ m; }, lane_mask,
      "__shfl_xor_sync");
}

template <class T>
T __shfl_up_sync(unsigned mask, T v, unsigned delta, int width = warpSize) {
  return ::seqboat::emu::Shuffle(
      mask, v, width, [](int lane, int d, int) { return lane - d; },
      static_cast<int>(delta), "__shfl_up_sync");
}

template <class T>
T __shfl_down_sync(unsigned mask, T v, unsigned delta, int width = warpSize) {
  return ::seqboat::emu::Shuffle(
      mask, v, width, [](int lane, int d, int) { return lane + d; },
      static_cast<int>(delta), "__shfl_down_sync");
}

inline unsigned __ballot_sync(unsigned mask, int predicate) {
  const uint64_t* all =
      ::seqboat::emu::WarpExchange(mask, predicate != 0, "__ballot_sync");
  unsigned bits = 0;
  for (int i = 0; i < ::seqboat::emu::kWarpSize; ++i) {
    bits |= static_cast<unsigned>(all[i] != 0) << i;
  }
  return bits;
}

inline int __any_sync(unsigned mask, int predicate) {
  return __ballot_sync(mask, predicate) != 0;
}

inline int __all_sync(unsigned mask, int predicate) {
  return __ballot_sync(mask, predicate) == 0xffffffffu;
}

// --- integer and bit intrinsics ---------------------------------------------

inline int __popc(unsigned x) { return __builtin_popcount(x); }
inline int __popcll(unsigned long long x) { return __builtin_popcountll(x); }
inline int __clz(int x) {
  return x == 0 ? 32 : __builtin_clz(static_cast<unsigned>(x));
}
inline int __ffs(int x) { return __builtin_ffs(x); }
inline float __uint_as_float(unsigned x) {
  return ::seqboat::emu::FromBits<float>(x);
}
inline float __int_as_float(int x) {
  return ::seqboat::emu::FromBits<float>(static_cast<unsigned>(x));
}
inline unsigned __float_as_uint(float x) {
  return static_cast<unsigned>(::seqboat::emu::ToBits(x));
}
inline int __float_as_int(float x) {
  return static_cast<int>(::seqboat::emu::ToBits(x));
}

// CUDA's min / max overloads for mixed arithmetic types: the usual
// conversions, then fminf / fmin semantics (NaN loses) for floating point.
template <class A, class B,
          class = std::enable_if_t<std::is_arithmetic_v<A> &&
                                   std::is_arithmetic_v<B>>>
inline std::common_type_t<A, B> min(A a, B b) {
  using T = std::common_type_t<A, B>;
  if constexpr (std::is_floating_point_v<T>) {
    return std::fmin(static_cast<T>(a), static_cast<T>(b));
  } else {
    return static_cast<T>(a) < static_cast<T>(b) ? static_cast<T>(a)
                                                 : static_cast<T>(b);
  }
}

template <class A, class B,
          class = std::enable_if_t<std::is_arithmetic_v<A> &&
                                   std::is_arithmetic_v<B>>>
inline std::common_type_t<A, B> max(A a, B b) {
  using T = std::common_type_t<A, B>;
  if constexpr (std::is_floating_point_v<T>) {
    return std::fmax(static_cast<T>(a), static_cast<T>(b));
  } else {
    return static_cast<T>(a) < static_cast<T>(b) ? static_cast<T>(b)
                                                 : static_cast<T>(a);
  }
}

// --- memory -----------------------------------------------------------------

// Read-only cache loads are ordinary loads (float, float4, uint4, ...).
template <class T>
T __ldg(const T* p) {
  return *p;
}

// No other thread runs between two sync points, so read-modify-write is
// atomic by construction.
template <class T>
T atomicAdd(T* address, T v) {
  const T old = *address;
  *address = old + v;
  return old;
}

template <class T>
T atomicMax(T* address, T v) {
  const T old = *address;
  if (old < v) *address = v;
  return old;
}

template <class T>
T atomicMin(T* address, T v) {
  const T old = *address;
  if (v < old) *address = v;
  return old;
}

template <class T>
T atomicExch(T* address, T v) {
  const T old = *address;
  *address = v;
  return old;
}

template <class T>
T atomicCAS(T* address, T compare, T v) {
  const T old = *address;
  if (old == compare) *address = v;
  return old;
}

inline void __threadfence() {}
inline void __threadfence_block() {}

// --- floating point ---------------------------------------------------------

// Rounded operations that must not be fused into an FMA: the volatile keeps
// the compiler's contraction away from the product.
inline float __fmul_rn(float a, float b) {
  volatile float r = a * b;
  return r;
}
inline float __fadd_rn(float a, float b) {
  volatile float r = a + b;
  return r;
}
inline float __fmaf_rn(float a, float b, float c) { return fmaf(a, b, c); }
inline float __fdividef(float a, float b) { return a / b; }
// The fast-math intrinsics are approximations on a GPU; here the exact libm
// functions, so these differ from a GPU's results in the low bits.
inline float __expf(float x) { return expf(x); }
inline float __logf(float x) { return logf(x); }
inline float __sinf(float x) { return sinf(x); }
inline float __cosf(float x) { return cosf(x); }
inline float __saturatef(float x) {
  return x < 0.0f ? 0.0f : x > 1.0f ? 1.0f : x;
}
inline float rsqrtf(float x) { return 1.0f / sqrtf(x); }

// CUB's block collectives and radix sorts, which the .cu files take from
// <cub/cub.cuh> under nvcc only.
#include "tools/cuda_emu/cub_emulation.h"

#endif  // SEQBOAT_TOOLS_CUDA_EMU_CUDA_EMULATION_H_
