// SEQBOAT_HD marks the per-element math that both backends share: a plain
// inline function for the CPU compiler, __host__ __device__ under nvcc.
#ifndef SEQBOAT_ENGINE_BACKEND_HD_H_
#define SEQBOAT_ENGINE_BACKEND_HD_H_

#ifndef SEQBOAT_HD
#if defined(__CUDACC__)
#define SEQBOAT_HD __host__ __device__ __forceinline__
#else
#define SEQBOAT_HD inline
#endif
#endif

#endif  // SEQBOAT_ENGINE_BACKEND_HD_H_
