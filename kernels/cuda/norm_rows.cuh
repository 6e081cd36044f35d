// The arithmetic of the row norms (RmsNorm, LayerNorm), shared by their own
// kernels (dense_kernels.cu) and the GEMV's folded pre-norm
// (gemv_kernels.cu), so that a GEMV that normalises its activations as it
// loads them sees the very floats the norm kernel would have written: each
// thread sums the columns j = threadIdx.x, + blockDim.x, ... in order, warps
// reduce by butterfly, and the warp sums are added by a second butterfly in
// which lanes past the block's warps hold 0. A thread with no column holds
// an exact 0, so blocks of 256 threads and the norm kernels' narrower ones
// (d < 256) reach the same bits.
#ifndef SEQBOAT_KERNELS_CUDA_NORM_ROWS_CUH_
#define SEQBOAT_KERNELS_CUDA_NORM_ROWS_CUH_

#include "engine/backend/dense_params.h"
#include "engine/backend/op_math.h"

namespace seqboat::cuda {

// v[i] summed over the block for each of N rows; every thread gets the
// sums. Every thread of the block must call it.
template <int N>
__device__ __forceinline__ void BlockSums(float (&v)[N]) {
  __shared__ float partial[32][N];
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
#pragma unroll
  for (int i = 0; i < N; ++i) {
    for (int o = 16; o > 0; o >>= 1)
      v[i] += __shfl_xor_sync(0xffffffffu, v[i], o);
  }
  __syncthreads();  // partial[] may still be read by a previous call
  if (lane == 0) {
#pragma unroll
    for (int i = 0; i < N; ++i) partial[warp][i] = v[i];
  }
  __syncthreads();
  const int warps = (blockDim.x + 31) >> 5;
#pragma unroll
  for (int i = 0; i < N; ++i) {
    v[i] = lane < warps ? partial[lane][i] : 0.0f;
    for (int o = 16; o > 0; o >>= 1)
      v[i] += __shfl_xor_sync(0xffffffffu, v[i], o);
  }
}

// The statistics of N rows of x (stride ldx, d columns): scale[i] the
// inverse RMS (kRms) or inverse standard deviation (kLayer), mean[i] the
// mean (kLayer; 0 otherwise). The CPU's RmsScale (1 / sqrtf), not rsqrtf,
// which is up to 2 ulp off.
template <int N>
__device__ __forceinline__ void RowNormStats(NormKind kind, const float* x,
                                             int64_t ldx, int d, float eps,
                                             float (&scale)[N],
                                             float (&mean)[N]) {
  float s[N];
#pragma unroll
  for (int i = 0; i < N; ++i) s[i] = 0.0f, mean[i] = 0.0f;
  if (kind == NormKind::kLayer) {
    for (int j = threadIdx.x; j < d; j += blockDim.x) {
#pragma unroll
      for (int i = 0; i < N; ++i) s[i] += x[i * ldx + j];
    }
    BlockSums<N>(s);
#pragma unroll
    for (int i = 0; i < N; ++i) {
      mean[i] = s[i] / static_cast<float>(d);
      s[i] = 0.0f;
    }
    for (int j = threadIdx.x; j < d; j += blockDim.x) {
#pragma unroll
      for (int i = 0; i < N; ++i) {
        const float c = x[i * ldx + j] - mean[i];
        s[i] += c * c;
      }
    }
  } else {
    for (int j = threadIdx.x; j < d; j += blockDim.x) {
#pragma unroll
      for (int i = 0; i < N; ++i) {
        const float v = x[i * ldx + j];
        s[i] += v * v;
      }
    }
  }
  BlockSums<N>(s);
#pragma unroll
  for (int i = 0; i < N; ++i) scale[i] = op_math::RmsScale(s[i], d, eps);
}

// One value of a row normalised with its statistics, times the norm's
// weight w (when has_w) plus its bias b (kLayer, when has_b). The products
// are rounded one at a time (__fmul_rn), so that no multiply-add is fused
// differently in the kernels that inline this.
__device__ __forceinline__ float NormedValue(NormKind kind, float x,
                                             float scale, float mean,
                                             bool has_w, float w, bool has_b,
                                             float b) {
  if (kind == NormKind::kLayer) {
    float v = __fmul_rn(x - mean, scale);
    if (has_w) v = __fmul_rn(v, w);
    if (has_b) v += b;
    return v;
  }
  const float v = __fmul_rn(x, scale);
  return has_w ? __fmul_rn(v, w) : v;
}

}  // namespace seqboat::cuda

#endif  // SEQBOAT_KERNELS_CUDA_NORM_ROWS_CUH_
