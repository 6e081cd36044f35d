// Rows of per-channel state moved between global memory and a register
// array in one piece, for the kernels that keep a channel's state in
// registers across a segment's tokens (mamba, s4d).
#ifndef SEQBOAT_KERNELS_CUDA_REGISTER_ROWS_CUH_
#define SEQBOAT_KERNELS_CUDA_REGISTER_ROWS_CUH_

#include <stdint.h>

namespace seqboat::cuda {

// dst = src[0, N). 16-byte loads when the row is aligned (uniform across a
// warp whenever N % 4 == 0, since rows are then 16-byte multiples apart).
template <int N>
__device__ __forceinline__ void LoadRow(float (&dst)[N], const float* src) {
  if constexpr (N % 4 == 0) {
    if ((reinterpret_cast<uintptr_t>(src) & 15) == 0) {
      const float4* v = reinterpret_cast<const float4*>(src);
#pragma unroll
      for (int i = 0; i < N / 4; ++i) {
        const float4 q = v[i];
        dst[4 * i] = q.x;
        dst[4 * i + 1] = q.y;
        dst[4 * i + 2] = q.z;
        dst[4 * i + 3] = q.w;
      }
      return;
    }
  }
#pragma unroll
  for (int i = 0; i < N; ++i) dst[i] = src[i];
}

template <int N>
__device__ __forceinline__ void StoreRow(float* dst, const float (&src)[N]) {
  if constexpr (N % 4 == 0) {
    if ((reinterpret_cast<uintptr_t>(dst) & 15) == 0) {
      float4* v = reinterpret_cast<float4*>(dst);
#pragma unroll
      for (int i = 0; i < N / 4; ++i) {
        v[i] = make_float4(src[4 * i], src[4 * i + 1], src[4 * i + 2],
                           src[4 * i + 3]);
      }
      return;
    }
  }
#pragma unroll
  for (int i = 0; i < N; ++i) dst[i] = src[i];
}

}  // namespace seqboat::cuda

#endif  // SEQBOAT_KERNELS_CUDA_REGISTER_ROWS_CUH_
