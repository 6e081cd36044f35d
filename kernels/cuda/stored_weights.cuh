// A weight matrix's values widened to fp32 in a kernel, from any storage of
// the CUDA backend (dense_kernels.h Storage): one at a time, or the 4, 8 or
// 16 values of one 16-byte load. fp8 codes come back divided by 256
// (Fp8Over256): the caller multiplies its finished sum by Fp8RowFactor, the
// row's scale times that 256, as the GEMV does.
#ifndef SEQBOAT_KERNELS_CUDA_STORED_WEIGHTS_CUH_
#define SEQBOAT_KERNELS_CUDA_STORED_WEIGHTS_CUH_

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <stdint.h>

#include "kernels/cuda/dense_kernels.h"
#include "kernels/cuda/fp8.cuh"

namespace seqboat::cuda {

// Elements of a matrix stored as s in 16 bytes.
__host__ __device__ __forceinline__ int WeightsPer16Bytes(Storage s) {
  return s == Storage::kF32 ? 4 : s == Storage::kFp8E4m3 ? 16 : 8;
}

__device__ __forceinline__ float StoredWeight(const void* w, Storage s,
                                              int64_t i) {
  switch (s) {
    case Storage::kBf16:
      return __bfloat162float(static_cast<const __nv_bfloat16*>(w)[i]);
    case Storage::kF16:
      return __half2float(static_cast<const __half*>(w)[i]);
    case Storage::kFp8E4m3:
      return Fp8Over256(static_cast<const uint8_t*>(w)[i]);
    default:
      return static_cast<const float*>(w)[i];
  }
}

// The WeightsPer16Bytes(s) values from element `at` on (16-byte aligned).
__device__ __forceinline__ void StoredWeights16(const void* w, Storage s,
                                                int64_t at, float (&out)[16]) {
  const int per = WeightsPer16Bytes(s);
  const uint4 raw = __ldg(reinterpret_cast<const uint4*>(
      static_cast<const uint8_t*>(w) + at * (16 / per)));
  const uint32_t words[4] = {raw.x, raw.y, raw.z, raw.w};
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    const uint32_t u = words[i];
    switch (s) {
      case Storage::kF32:
        out[i] = __uint_as_float(u);
        break;
      case Storage::kBf16:  // the top half of a float
        out[2 * i] = __uint_as_float(u << 16);
        out[2 * i + 1] = __uint_as_float(u & 0xffff0000u);
        break;
      case Storage::kF16:
        out[2 * i] =
            __half2float(__ushort_as_half(static_cast<unsigned short>(u)));
        out[2 * i + 1] = __half2float(
            __ushort_as_half(static_cast<unsigned short>(u >> 16)));
        break;
      default:
#pragma unroll
        for (int b = 0; b < 4; ++b) out[4 * i + b] = Fp8Over256(u >> (8 * b));
        break;
    }
  }
}

// What multiplies row r's finished sum: fp8's row scale times the 256 that
// Fp8Over256 left out, 1 for the other storages.
__device__ __forceinline__ float Fp8RowFactor(const void* w, Storage s,
                                              int64_t rows, int64_t cols,
                                              int64_t r) {
  if (s != Storage::kFp8E4m3) return 1.0f;
  return Fp8RowScales(w, rows, cols)[r] * 256.0f;
}

}  // namespace seqboat::cuda

#endif  // SEQBOAT_KERNELS_CUDA_STORED_WEIGHTS_CUH_
