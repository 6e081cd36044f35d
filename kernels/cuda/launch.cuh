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
#ifndef SEQBOAT_KERNELS_CUDA_LAUNCH_CUH_
#define SEQBOAT_KERNELS_CUDA_LAUNCH_CUH_

#if defined(SEQBOAT_CUDA_EMULATION)
// tools/cuda_emu/cuda_emulation.h is included before anything else there.
#define SEQBOAT_LAUNCH(grid, block, shared_bytes, stream, ...)          \
  ::seqboat::emu::Launch(#__VA_ARGS__, (grid), (block), (shared_bytes), \
                         (stream), __VA_ARGS__)
#define SEQBOAT_DYNAMIC_SHARED(type, name) \
  type* const name = ::seqboat::emu::DynamicShared<type>()
#else
#define SEQBOAT_LAUNCH(grid, block, shared_bytes, stream, ...) \
  __VA_ARGS__<<<grid, block, shared_bytes, stream>>>
#define SEQBOAT_DYNAMIC_SHARED(type, name) extern __shared__ type name[]
#endif

#endif  // SEQBOAT_KERNELS_CUDA_LAUNCH_CUH_
