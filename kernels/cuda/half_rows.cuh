// The store of a HalfRows copy (engine/backend/half_rows.h), the one place
// that rounds a GEMM's fp32 input to its 16-bit format: ConvertRowsKernel
// and the ops that write the copy beside their fp32 output both call it, so
// a GEMM reading either sees the same bits.
#ifndef SEQBOAT_KERNELS_CUDA_HALF_ROWS_CUH_
#define SEQBOAT_KERNELS_CUDA_HALF_ROWS_CUH_

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <stdint.h>

#include "engine/backend/half_rows.h"

namespace seqboat::cuda {

// r[row, col] = v rounded to nearest even; no copy requested: nothing.
__device__ __forceinline__ void StoreHalf(const HalfRows& r, int64_t row,
                                          int64_t col, float v) {
  if (r.data == nullptr) return;
  const int64_t at = row * r.ld + col;
  if (r.format == HalfFormat::kBf16) {
    static_cast<__nv_bfloat16*>(r.data)[at] = __float2bfloat16_rn(v);
  } else if (r.format == HalfFormat::kF16) {
    static_cast<__half*>(r.data)[at] = __float2half_rn(v);
  }
}

}  // namespace seqboat::cuda

#endif  // SEQBOAT_KERNELS_CUDA_HALF_ROWS_CUH_
