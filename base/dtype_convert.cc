#include "base/dtype_convert.h"

#include <immintrin.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>

namespace seqboat {
namespace {

float FromBits(uint32_t bits) {
  float f;
  std::memcpy(&f, &bits, sizeof(f));
  return f;
}

uint32_t ToBits(float f) {
  uint32_t bits;
  std::memcpy(&bits, &f, sizeof(bits));
  return bits;
}

// The files are little-endian, and so is every host we build for; memcpy
// keeps unaligned reads well-defined.
uint16_t Load16(const unsigned char* p) {
  uint16_t v;
  std::memcpy(&v, p, sizeof(v));
  return v;
}

}  // namespace

float Bf16ToF32(uint16_t bits) {
  return FromBits(static_cast<uint32_t>(bits) << 16);
}

float F16ToF32(uint16_t bits) {
  const uint32_t sign = static_cast<uint32_t>(bits & 0x8000u) << 16;
  const uint32_t exponent = (bits >> 10) & 0x1fu;
  uint32_t mantissa = bits & 0x3ffu;
  if (exponent == 0x1f) {
    // Inf (mantissa 0) or NaN; the payload moves to the top of f32's mantissa.
    return FromBits(sign | 0x7f800000u | (mantissa << 13));
  }
  if (exponent != 0) {
    // Normal: rebias the exponent from 15 to 127.
    return FromBits(sign | ((exponent + 112) << 23) | (mantissa << 13));
  }
  if (mantissa == 0) return FromBits(sign);  // +-0
  // Subnormal (mantissa * 2^-24): normal in f32, so shift the leading one
  // into the implicit bit and lower the exponent to match.
  uint32_t f32_exponent = 113;  // 127 - 15 + 1
  while ((mantissa & 0x400u) == 0) {
    mantissa <<= 1;
    --f32_exponent;
  }
  mantissa &= 0x3ffu;
  return FromBits(sign | (f32_exponent << 23) | (mantissa << 13));
}

uint16_t F32ToF16(float value) {
  // F16C is part of the build's baseline (x86-64-v3).
  return static_cast<uint16_t>(_mm_extract_epi16(
      _mm_cvtps_ph(_mm_set_ss(value),
                   _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC),
      0));
}

uint16_t F32ToBf16(float value) {
  const uint32_t bits = ToBits(value);
  if ((bits & 0x7fffffffu) > 0x7f800000u) {
    // NaN: truncating could clear every remaining mantissa bit and turn it
    // into infinity, so force the quiet bit.
    return static_cast<uint16_t>((bits >> 16) | 0x0040u);
  }
  // Round to nearest even: add just under half an ulp, plus one when the
  // kept part is odd; a carry into the exponent is the correct rounding.
  const uint32_t rounded = bits + 0x7fffu + ((bits >> 16) & 1u);
  return static_cast<uint16_t>(rounded >> 16);
}

float E4m3ToF32(uint8_t bits) {
  const float sign = (bits & 0x80u) != 0 ? -1.0f : 1.0f;
  const int exponent = (bits >> 3) & 0xf;
  const int mantissa = bits & 0x7;
  if (exponent == 0xf && mantissa == 0x7) {
    return std::copysign(std::numeric_limits<float>::quiet_NaN(), sign);
  }
  // Subnormals are mantissa * 2^-9; normals (8 + mantissa) * 2^(e - 10).
  if (exponent == 0) return sign * std::ldexp(static_cast<float>(mantissa), -9);
  return sign * std::ldexp(static_cast<float>(8 + mantissa), exponent - 10);
}

uint8_t F32ToE4m3(float value) {
  const uint8_t sign = std::signbit(value) ? 0x80u : 0x00u;
  if (std::isnan(value)) return sign | 0x7fu;
  const float a = std::fabs(value);
  if (a >= 448.0f) return sign | 0x7eu;  // saturate, infinities included
  if (a == 0.0f) return sign;            // frexp's exponent of 0 is 0
  // a = q * 2^step with q in [8, 16) for normals (step = e - 3) and q in
  // [0, 8) at the subnormals' fixed step 2^-9: the code's 3 mantissa bits
  // are q's below its leading 8. Scaling by a power of two is exact.
  int e = 0;
  std::frexp(a, &e);  // a = f * 2^e, f in [0.5, 1)
  const int step = std::max(e - 4, -9);
  const float q = std::ldexp(a, -step);
  float whole = std::floor(q);
  const float frac = q - whole;  // exact: q < 16
  if (frac > 0.5f || (frac == 0.5f && std::fmod(whole, 2.0f) != 0.0f)) {
    whole += 1.0f;
  }
  // Normals are (8 + m) * 2^(E - 10), so code = E * 8 + m = (step + 9) * 8
  // + q, and a subnormal's code is q = (-9 + 9) * 8 + q: one formula. A q
  // rounded up to 16 (or a subnormal's up to 8) is the next exponent's 8,
  // which the formula carries by itself.
  const int code = (step + 9) * 8 + static_cast<int>(whole);
  return sign | static_cast<uint8_t>(std::min(code, 0x7e));
}

void Bf16ToF32(const void* src, size_t count, float* dst) {
  const auto* p = static_cast<const unsigned char*>(src);
  for (size_t i = 0; i < count; ++i) dst[i] = Bf16ToF32(Load16(p + 2 * i));
}

void F16ToF32(const void* src, size_t count, float* dst) {
  const auto* p = static_cast<const unsigned char*>(src);
  for (size_t i = 0; i < count; ++i) dst[i] = F16ToF32(Load16(p + 2 * i));
}

}  // namespace seqboat
