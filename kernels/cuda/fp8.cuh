// fp8 e4m3 codes in kernels, shared by the .cu files that read fp8 weights.
#ifndef SEQBOAT_KERNELS_CUDA_FP8_CUH_
#define SEQBOAT_KERNELS_CUDA_FP8_CUH_

#include <cuda_fp16.h>
#include <stdint.h>

namespace seqboat::cuda {

// The e4m3 code in the low 8 bits of `code`, divided by 256: its bits moved
// into an fp16's exponent and mantissa are exactly that value (fp16's
// exponent bias is 8 above e4m3's), subnormals included, so decoding is two
// masks and one conversion. Callers multiply the factor 256 back into the
// row scale. NaN codes are never stored (the upload refuses non-finite
// weights).
__device__ __forceinline__ float Fp8Over256(uint32_t code) {
  const uint32_t h = ((code & 0x80u) << 8) | ((code & 0x7fu) << 7);
  return __half2float(__ushort_as_half(static_cast<unsigned short>(h)));
}

}  // namespace seqboat::cuda

#endif  // SEQBOAT_KERNELS_CUDA_FP8_CUH_
