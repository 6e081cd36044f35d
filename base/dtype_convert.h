// Conversions between fp32 and the 16-bit float formats stored in weights.
//
// bf16/f16 -> f32 are exact (every value, including subnormals, infinities and
// NaN payloads, is representable in f32). f32 -> bf16 rounds to nearest, ties
// to even, as PyTorch does; NaN stays a (quiet) NaN with its sign, and values
// past the bf16 range round to infinity. f32 -> f16 likewise (F16C's rounding,
// the same as CUDA's __float2half_rn), subnormal halves included.
//
// fp8 e4m3 (the OCP "E4M3FN" format: 4 exponent bits of bias 7, 3 mantissa
// bits, no infinities, S.1111.111 is NaN, largest finite 448): decoding is
// exact; encoding rounds to nearest, ties to even, saturates to +-448 (as
// CUDA's __NV_SATFINITE conversion does, infinities included) and keeps NaN
// as NaN with its sign.
//
// The bulk versions read their source with memcpy, so it may be unaligned
// (tensor data in a mapped safetensors file often is).
#ifndef SEQBOAT_BASE_DTYPE_CONVERT_H_
#define SEQBOAT_BASE_DTYPE_CONVERT_H_

#include <cstddef>
#include <cstdint>

namespace seqboat {

float Bf16ToF32(uint16_t bits);
float F16ToF32(uint16_t bits);
uint16_t F32ToBf16(float value);
uint16_t F32ToF16(float value);
float E4m3ToF32(uint8_t bits);
uint8_t F32ToE4m3(float value);

// `src` holds `count` little-endian 16-bit values; `dst` receives `count`
// floats. The ranges must not overlap.
void Bf16ToF32(const void* src, size_t count, float* dst);
void F16ToF32(const void* src, size_t count, float* dst);

}  // namespace seqboat

#endif  // SEQBOAT_BASE_DTYPE_CONVERT_H_
