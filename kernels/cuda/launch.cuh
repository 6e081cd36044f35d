// Kernel launches and the dynamic shared array, spelled so that both nvcc and
// a host C++ compiler accept the .cu files: kernels/emu compiles them as C++
// with SEQBOAT_CUDA_EMULATION defined and runs the kernels on the CPU, where
// `<<<...>>>` and `extern __shared__` do not parse.
//
//   SEQBOAT_LAUNCH(grid, block, shared_bytes, stream, Kernel<4>)(args...);
//   SEQBOAT_DYNAMIC_SHARED(double, smem);  // extern __shared__ double smem[];
//
// The kernel is the variadic argument so that template argument lists with
// commas need no parentheses.
//
// Early launches (Hopper's programmatic dependent launch): at batch 1 a
// decode layer is a chain of short kernels, and each boundary costs the
// drain of one grid and the launch of the next, a few microseconds in which
// HBM idles. A kernel launched with
//
//   SEQBOAT_LAUNCH_EARLY(grid, block, shared_bytes, stream, early, K)(...);
//
// and early true may start while the kernel before it still runs, once
// every block of that one called LetDependentsLaunch(). Until it calls
// WaitForPriorGrids() it may touch nothing but memory no kernel writes
// (weights: PrefetchL2 streams them into L2 meanwhile); every thread of it
// must call WaitForPriorGrids() (the emulation aborts otherwise). Where the
// kernel before was launched plainly, or is not a kernel, or early is
// false, the launch is an ordinary one and the wait returns at once.
//
// The launchers of kernels/cuda take a LaunchQueue (launch_queue.h) and
// launch with
//
//   SEQBOAT_LAUNCH_ON(grid, block, shared_bytes, queue, K)(...);
//
// early where the queue says so. Such a kernel must be right both ways, so
// the emulation checks every thread's wait whether the launch was early or
// not; kernels that prefetch nothing begin with JoinLaunchChain().
#ifndef SEQBOAT_KERNELS_CUDA_LAUNCH_CUH_
#define SEQBOAT_KERNELS_CUDA_LAUNCH_CUH_

#include <stdint.h>

#if defined(SEQBOAT_CUDA_EMULATION)
// tools/cuda_emu/cuda_emulation.h is included before anything else there.
#define SEQBOAT_LAUNCH(grid, block, shared_bytes, stream, ...)          \
  ::seqboat::emu::Launch(#__VA_ARGS__, (grid), (block), (shared_bytes), \
                         (stream), __VA_ARGS__)
#define SEQBOAT_LAUNCH_EARLY(grid, block, shared_bytes, stream, early, ...) \
  ::seqboat::emu::Launch(#__VA_ARGS__, (grid), (block), (shared_bytes),     \
                         (stream), __VA_ARGS__, (early))
#define SEQBOAT_LAUNCH_ON(grid, block, shared_bytes, queue, ...)        \
  ::seqboat::emu::Launch(#__VA_ARGS__, (grid), (block), (shared_bytes), \
                         (queue).stream, __VA_ARGS__, (queue).early,    \
                         /*must_wait=*/true)
#define SEQBOAT_DYNAMIC_SHARED(type, name) \
  type* const name = ::seqboat::emu::DynamicShared<type>()
#else
#include <utility>

#define SEQBOAT_LAUNCH(grid, block, shared_bytes, stream, ...) \
  __VA_ARGS__<<<grid, block, shared_bytes, stream>>>
#define SEQBOAT_LAUNCH_EARLY(grid, block, shared_bytes, stream, early, ...)  \
  ::seqboat::LaunchEarly((grid), (block), (shared_bytes), (stream), (early), \
                         __VA_ARGS__)
#define SEQBOAT_LAUNCH_ON(grid, block, shared_bytes, queue, ...)  \
  SEQBOAT_LAUNCH_EARLY(grid, block, shared_bytes, (queue).stream, \
                       (queue).early, __VA_ARGS__)
#define SEQBOAT_DYNAMIC_SHARED(type, name) extern __shared__ type name[]

namespace seqboat {

// cudaLaunchKernelEx with the programmatic stream serialization attribute;
// a failed launch sets the last error, as `<<<...>>>` does.
template <class... Params>
class EarlyLaunch {
 public:
  EarlyLaunch(dim3 grid, dim3 block, size_t shared_bytes, cudaStream_t stream,
              bool early, void (*kernel)(Params...))
      : kernel_(kernel) {
    attribute_.id = cudaLaunchAttributeProgrammaticStreamSerialization;
    attribute_.val.programmaticStreamSerializationAllowed = early ? 1 : 0;
    config_.gridDim = grid;
    config_.blockDim = block;
    config_.dynamicSmemBytes = shared_bytes;
    config_.stream = stream;
    config_.attrs = &attribute_;
    config_.numAttrs = 1;
  }

  template <class... Args>
  void operator()(Args&&... args) {
    (void)cudaLaunchKernelEx(&config_, kernel_, std::forward<Args>(args)...);
  }

 private:
  void (*kernel_)(Params...);
  cudaLaunchAttribute attribute_{};
  cudaLaunchConfig_t config_{};
};

template <class... Params>
EarlyLaunch<Params...> LaunchEarly(dim3 grid, dim3 block, size_t shared_bytes,
                                   cudaStream_t stream, bool early,
                                   void (*kernel)(Params...)) {
  return EarlyLaunch<Params...>(grid, block, shared_bytes, stream, early,
                                kernel);
}

}  // namespace seqboat
#endif

namespace seqboat {

// Returns once the kernels this one was launched early behind have finished
// and their writes are visible (griddepcontrol.wait; sm_90).
__device__ __forceinline__ void WaitForPriorGrids() {
#if defined(SEQBOAT_CUDA_EMULATION)
  ::seqboat::emu::WaitForPriorGrids();
#elif defined(__CUDA_ARCH__)
  asm volatile("griddepcontrol.wait;" ::: "memory");
#endif
}

// Lets a kernel launched early behind this one start once every block of
// this one has called it (griddepcontrol.launch_dependents): the early
// kernel's blocks then prefetch their weights beside this one's work. Any
// kernel may call it, at any point: it orders nothing.
__device__ __forceinline__ void LetDependentsLaunch() {
#if defined(__CUDA_ARCH__) && !defined(SEQBOAT_CUDA_EMULATION)
  asm volatile("griddepcontrol.launch_dependents;");
#endif
}

// The first statement of a kernel launched on a LaunchQueue that reads no
// weights ahead: it waits for the kernel before, so that nothing it reads or
// writes races that one, and then lets the kernel after it launch, whose
// blocks then wait beside this one's work instead of after its drain.
__device__ __forceinline__ void JoinLaunchChain() {
  WaitForPriorGrids();
  LetDependentsLaunch();
}

// A hint to bring `bytes` (a multiple of 16) at `p` (16-byte aligned) into
// L2 without waiting (cp.async.bulk.prefetch; sm_90). The emulation checks
// both and records the range.
__device__ __forceinline__ void PrefetchL2(const void* p, uint32_t bytes) {
#if defined(SEQBOAT_CUDA_EMULATION)
  ::seqboat::emu::PrefetchL2(p, bytes);
#elif defined(__CUDA_ARCH__)
  asm volatile("cp.async.bulk.prefetch.L2.global [%0], %1;" ::"l"(
                   __cvta_generic_to_global(p)),
               "r"(bytes)
               : "memory");
#endif
}

}  // namespace seqboat

#endif  // SEQBOAT_KERNELS_CUDA_LAUNCH_CUH_
