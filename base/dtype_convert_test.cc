#include "base/dtype_convert.h"

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <vector>

#include "gtest/gtest.h"

namespace seqboat {
namespace {

uint32_t Bits(float f) {
  uint32_t b;
  std::memcpy(&b, &f, sizeof(b));
  return b;
}

float FromBits(uint32_t b) {
  float f;
  std::memcpy(&f, &b, sizeof(f));
  return f;
}

// The IEEE binary16 value of `bits`, computed arithmetically rather than by
// bit shuffling, as an independent reference.
double F16Reference(uint16_t bits) {
  const double sign = (bits & 0x8000) ? -1.0 : 1.0;
  const int exponent = (bits >> 10) & 0x1f;
  const int mantissa = bits & 0x3ff;
  if (exponent == 0) return sign * std::ldexp(mantissa, -24);
  if (exponent == 31) {
    return mantissa == 0 ? sign * std::numeric_limits<double>::infinity()
                         : std::numeric_limits<double>::quiet_NaN();
  }
  return sign * std::ldexp(1024 + mantissa, exponent - 25);
}

TEST(DTypeConvertTest, F16EdgeValues) {
  EXPECT_EQ(Bits(F16ToF32(0x0000)), Bits(0.0f));
  EXPECT_EQ(Bits(F16ToF32(0x8000)), Bits(-0.0f));
  EXPECT_EQ(F16ToF32(0x3c00), 1.0f);
  EXPECT_EQ(F16ToF32(0xc000), -2.0f);
  EXPECT_EQ(F16ToF32(0x7bff), 65504.0f);               // largest finite
  EXPECT_EQ(F16ToF32(0x0400), std::ldexp(1.0f, -14));  // smallest normal
  EXPECT_EQ(F16ToF32(0x0001), std::ldexp(1.0f, -24));  // smallest subnormal
  EXPECT_EQ(F16ToF32(0x8001), -std::ldexp(1.0f, -24));
  EXPECT_EQ(F16ToF32(0x03ff), std::ldexp(1023.0f, -24));  // largest subnormal
  EXPECT_EQ(F16ToF32(0x3555), 0.333251953125f);
  EXPECT_EQ(F16ToF32(0x7c00), std::numeric_limits<float>::infinity());
  EXPECT_EQ(F16ToF32(0xfc00), -std::numeric_limits<float>::infinity());
  EXPECT_TRUE(std::isnan(F16ToF32(0x7e00)));
  EXPECT_TRUE(std::isnan(F16ToF32(0x7c01)));  // signalling, lowest payload
  EXPECT_TRUE(std::isnan(F16ToF32(0xfe00)));
  EXPECT_TRUE(std::signbit(F16ToF32(0xfe00)));
}

TEST(DTypeConvertTest, F16AllValuesMatchReference) {
  for (uint32_t b = 0; b <= 0xffff; ++b) {
    const uint16_t bits = static_cast<uint16_t>(b);
    const float got = F16ToF32(bits);
    const double want = F16Reference(bits);
    if (std::isnan(want)) {
      EXPECT_TRUE(std::isnan(got)) << std::hex << b;
    } else {
      EXPECT_EQ(static_cast<double>(got), want) << std::hex << b;
      EXPECT_EQ(std::signbit(got), (b & 0x8000) != 0) << std::hex << b;
    }
  }
}

TEST(DTypeConvertTest, Bf16ToF32EdgeValues) {
  EXPECT_EQ(Bf16ToF32(0x3f80), 1.0f);
  EXPECT_EQ(Bf16ToF32(0xbf80), -1.0f);
  EXPECT_EQ(Bits(Bf16ToF32(0x8000)), Bits(-0.0f));
  EXPECT_EQ(Bf16ToF32(0x7f7f), FromBits(0x7f7f0000));    // largest finite
  EXPECT_EQ(Bf16ToF32(0x0001), std::ldexp(1.0f, -133));  // smallest subnormal
  EXPECT_EQ(Bf16ToF32(0x7f80), std::numeric_limits<float>::infinity());
  EXPECT_EQ(Bf16ToF32(0xff80), -std::numeric_limits<float>::infinity());
  EXPECT_TRUE(std::isnan(Bf16ToF32(0x7fc0)));
  EXPECT_TRUE(std::isnan(Bf16ToF32(0x7f81)));
}

TEST(DTypeConvertTest, F32ToBf16RoundsToNearestEven) {
  EXPECT_EQ(F32ToBf16(1.0f), 0x3f80);
  EXPECT_EQ(F32ToBf16(-0.0f), 0x8000);
  // bf16 keeps 7 mantissa bits, so near 1 its ulp is 2^-7.
  const float half_ulp = std::ldexp(1.0f, -8);
  EXPECT_EQ(F32ToBf16(1.0f + half_ulp), 0x3f80);      // tie -> even (down)
  EXPECT_EQ(F32ToBf16(1.0f + 3 * half_ulp), 0x3f82);  // tie -> even (up)
  EXPECT_EQ(F32ToBf16(1.0f + half_ulp + std::ldexp(1.0f, -20)), 0x3f81);
  EXPECT_EQ(F32ToBf16(1.0f + half_ulp - std::ldexp(1.0f, -20)), 0x3f80);
  EXPECT_EQ(F32ToBf16(-(1.0f + 3 * half_ulp)), 0xbf82);
  // Subnormals round the same way.
  EXPECT_EQ(F32ToBf16(FromBits(0x00008000)), 0x0000);
  EXPECT_EQ(F32ToBf16(FromBits(0x00018000)), 0x0002);
  EXPECT_EQ(F32ToBf16(FromBits(0x00000001)), 0x0000);
  // Carry through the mantissa into the exponent.
  EXPECT_EQ(F32ToBf16(FromBits(0x3fffffff)), 0x4000);
  // Past the largest bf16 rounds to infinity; infinities stay.
  EXPECT_EQ(F32ToBf16(std::numeric_limits<float>::max()), 0x7f80);
  EXPECT_EQ(F32ToBf16(std::numeric_limits<float>::infinity()), 0x7f80);
  EXPECT_EQ(F32ToBf16(-std::numeric_limits<float>::infinity()), 0xff80);
  EXPECT_EQ(F32ToBf16(FromBits(0x7f7f7fff)), 0x7f7f);
}

TEST(DTypeConvertTest, F32ToBf16KeepsNaN) {
  // Payload only in the low 16 bits: truncation alone would give infinity.
  EXPECT_TRUE(std::isnan(Bf16ToF32(F32ToBf16(FromBits(0x7f800001)))));
  EXPECT_TRUE(std::isnan(Bf16ToF32(F32ToBf16(FromBits(0xff800001)))));
  EXPECT_TRUE(std::signbit(Bf16ToF32(F32ToBf16(FromBits(0xff800001)))));
  EXPECT_TRUE(std::isnan(
      Bf16ToF32(F32ToBf16(std::numeric_limits<float>::quiet_NaN()))));
  // Largest-mantissa NaN must not carry into the sign bit.
  EXPECT_EQ(F32ToBf16(FromBits(0x7fffffff)), 0x7fff);
}

TEST(DTypeConvertTest, F32ToF16RoundsToNearestEvenAndRoundTrips) {
  for (uint32_t h = 0; h < 0x10000u; ++h) {
    const uint16_t bits = static_cast<uint16_t>(h);
    const float f = F16ToF32(bits);
    if (std::isnan(f)) {
      EXPECT_TRUE(std::isnan(F16ToF32(F32ToF16(f)))) << h;
    } else {
      EXPECT_EQ(F32ToF16(f), bits) << h;
    }
  }
  // 1 + 2^-11 is halfway between 1 and the next half (1 + 2^-10): to even.
  EXPECT_EQ(F32ToF16(1.0f + 0x1p-11f), 0x3c00);
  EXPECT_EQ(F32ToF16(1.0f + 0x1p-10f + 0x1p-11f), 0x3c02);
  EXPECT_EQ(F32ToF16(70000.0f), 0x7c00);  // past 65504: infinity
}

TEST(DTypeConvertTest, Bf16RoundTripsExactly) {
  for (uint32_t b = 0; b <= 0xffff; ++b) {
    const float f = Bf16ToF32(static_cast<uint16_t>(b));
    if (std::isnan(f)) continue;
    EXPECT_EQ(F32ToBf16(f), b) << std::hex << b;
  }
}

TEST(DTypeConvertTest, BulkConversionReadsUnalignedSource) {
  const uint16_t f16[] = {0x3c00, 0xc000, 0x0001, 0x7c00};
  const uint16_t bf16[] = {0x3f80, 0x4040, 0xff80, 0x0000};
  std::vector<unsigned char> buffer(1 + sizeof(f16));
  float out[4];

  std::memcpy(buffer.data() + 1, f16, sizeof(f16));
  F16ToF32(buffer.data() + 1, 4, out);
  EXPECT_EQ(out[0], 1.0f);
  EXPECT_EQ(out[1], -2.0f);
  EXPECT_EQ(out[2], std::ldexp(1.0f, -24));
  EXPECT_EQ(out[3], std::numeric_limits<float>::infinity());

  std::memcpy(buffer.data() + 1, bf16, sizeof(bf16));
  Bf16ToF32(buffer.data() + 1, 4, out);
  EXPECT_EQ(out[0], 1.0f);
  EXPECT_EQ(out[1], 3.0f);
  EXPECT_EQ(out[2], -std::numeric_limits<float>::infinity());
  EXPECT_EQ(out[3], 0.0f);
}

// e4m3 decoding of every code against the format's definition written
// out (bias 7, 3 mantissa bits, S.1111.111 NaN, no infinities).
TEST(DTypeConvertTest, E4m3DecodesEveryCode) {
  int nans = 0;
  for (int c = 0; c < 256; ++c) {
    SCOPED_TRACE(c);
    const float v = E4m3ToF32(static_cast<uint8_t>(c));
    if ((c & 0x7f) == 0x7f) {
      EXPECT_TRUE(std::isnan(v));
      EXPECT_EQ(std::signbit(v), c >= 0x80);
      ++nans;
      continue;
    }
    const int e = (c >> 3) & 15, m = c & 7;
    const double mag = e == 0 ? m / 8.0 * std::pow(2.0, -6)
                              : (1.0 + m / 8.0) * std::pow(2.0, e - 7);
    EXPECT_EQ(static_cast<double>(v), c >= 0x80 ? -mag : mag);
    EXPECT_EQ(std::signbit(v), c >= 0x80);
  }
  EXPECT_EQ(nans, 2);
  EXPECT_EQ(E4m3ToF32(0x7e), 448.0f);
  EXPECT_EQ(E4m3ToF32(0x38), 1.0f);
  EXPECT_EQ(E4m3ToF32(0x01), std::ldexp(1.0f, -9));
  EXPECT_EQ(E4m3ToF32(0x08), std::ldexp(1.0f, -6));
}

// Encoding: every finite code round-trips; between two neighbouring codes
// the value goes to the nearer, a tie to the even code (mantissa bit 0
// clear); past 448 it saturates; NaN stays NaN.
TEST(DTypeConvertTest, F32ToE4m3RoundsToNearestEvenAndSaturates) {
  for (int c = 0; c < 256; ++c) {
    if ((c & 0x7f) == 0x7f) continue;
    SCOPED_TRACE(c);
    const float v = E4m3ToF32(static_cast<uint8_t>(c));
    EXPECT_EQ(F32ToE4m3(v), c);
    // Codes of one sign in order of magnitude are consecutive integers.
    if ((c & 0x7f) == 0x7e) continue;
    const float next = E4m3ToF32(static_cast<uint8_t>(c + 1));
    const float mid = (v + next) / 2;  // exact: both have 4 significant bits
    const int even = (c & 1) == 0 ? c : c + 1;
    EXPECT_EQ(F32ToE4m3(mid), even);
    EXPECT_EQ(F32ToE4m3(std::nextafter(mid, v)), c);
    EXPECT_EQ(F32ToE4m3(std::nextafter(mid, next)), c + 1);
  }
  const float inf = std::numeric_limits<float>::infinity();
  EXPECT_EQ(F32ToE4m3(449.0f), 0x7e);
  EXPECT_EQ(F32ToE4m3(464.0f), 0x7e);
  EXPECT_EQ(F32ToE4m3(1e30f), 0x7e);
  EXPECT_EQ(F32ToE4m3(inf), 0x7e);
  EXPECT_EQ(F32ToE4m3(-inf), 0xfe);
  EXPECT_EQ(F32ToE4m3(std::numeric_limits<float>::quiet_NaN()), 0x7f);
  EXPECT_EQ(F32ToE4m3(-std::numeric_limits<float>::quiet_NaN()), 0xff);
  // Below half the smallest subnormal: zero, with its sign.
  EXPECT_EQ(F32ToE4m3(std::ldexp(1.0f, -11)), 0x00);
  EXPECT_EQ(F32ToE4m3(-std::ldexp(1.0f, -11)), 0x80);
  EXPECT_EQ(F32ToE4m3(std::ldexp(1.0f, -30)), 0x00);
}

}  // namespace
}  // namespace seqboat
