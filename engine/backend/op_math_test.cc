#include "engine/backend/op_math.h"

#include <cmath>
#include <cstdint>
#include <cstring>

#include "gtest/gtest.h"

namespace seqboat::op_math {
namespace {

TEST(OpMathTest, ExpIsWithinOneUlpOverItsRange) {
  double worst = 0;
  for (float x = -87.0f; x < 88.0f; x += 0.00071f) {
    const double want = std::exp(static_cast<double>(x));
    worst = std::max(worst, std::fabs(Exp(x) - want) / want);
  }
  EXPECT_LT(worst, 1.19e-7);  // float epsilon
  EXPECT_EQ(Exp(0.0f), 1.0f);
  EXPECT_EQ(Exp(-100.0f), 0.0f);
  EXPECT_EQ(Exp(-INFINITY), 0.0f);
}

// ExpUpTo88 is Exp without the clamp at 88: the same bits wherever that
// clamp does nothing, including far below -87 (where 2^k would be out of
// int range: the result is still 0) and NaN. Above 88 Exp saturates.
TEST(OpMathTest, ExpUpTo88IsExpBelowTheClamp) {
  auto bits = [](float v) {
    uint32_t b;
    std::memcpy(&b, &v, sizeof b);
    return b;
  };
  int differ = 0;
  for (float x = -200.0f; x <= 88.0f; x += 0.00313f) {
    if (bits(ExpUpTo88(x)) != bits(Exp(x))) ++differ;
  }
  EXPECT_EQ(differ, 0);
  EXPECT_EQ(ExpUpTo88(-3.0e38f), 0.0f);
  EXPECT_EQ(ExpUpTo88(-INFINITY), 0.0f);
  EXPECT_TRUE(std::isnan(ExpUpTo88(NAN)));
  EXPECT_TRUE(std::isnan(Exp(NAN)));
  EXPECT_EQ(Exp(1000.0f), Exp(88.0f));
  EXPECT_EQ(Exp(INFINITY), Exp(88.0f));
  EXPECT_TRUE(std::isfinite(Exp(INFINITY)));
}

TEST(OpMathTest, Exp2OfProductIsWithinTwoUlpOfExp2) {
  double worst = 0;
  for (float u = -126.0f; u < 127.0f; u += 0.00093f) {
    for (float v : {1.0f, 0.37f, -2.9f}) {
      const double prod = static_cast<double>(u) * v;
      if (prod < -126 || prod > 127) continue;
      const double want = std::exp2(prod);
      worst = std::max(worst, std::fabs(Exp2OfProduct(u, v) - want) / want);
    }
  }
  EXPECT_LT(worst, 2.4e-7);  // two fp32 epsilons
  EXPECT_EQ(Exp2OfProduct(1.0f, 0.0f), 1.0f);
  EXPECT_EQ(Exp2OfProduct(-3.0f, 1.0f), 0.125f);  // powers of 2 exactly
  EXPECT_EQ(Exp2OfProduct(4.0f, 5.0f), 1048576.0f);
  EXPECT_EQ(Exp2OfProduct(1.0f, -127.0f), 0.0f);
  EXPECT_EQ(Exp2OfProduct(3.0e30f, -3.0e30f), 0.0f);
  EXPECT_EQ(Exp2OfProduct(1.0f, -INFINITY), 0.0f);
  EXPECT_TRUE(std::isnan(Exp2OfProduct(NAN, -1.0f)));
}

// The scan's decay exp(delta a), as 2^((delta log2 e) a): rounding
// delta log2(e) costs about |delta a| 2^-24 relatively, the order of the
// rounding of the product delta a that an fp32 reference makes first.
TEST(OpMathTest, ScanEntryDecaysByExpOfDeltaA) {
  double worst = 0;
  for (float delta = 1e-4f; delta < 12.0f; delta *= 1.013f) {
    for (float a = -20.0f; a < -0.01f; a *= 0.93f) {
      const double da = static_cast<double>(delta) * a;
      if (da < -87) continue;
      const double want = std::exp(da);
      const double got = ScanEntry(1.0f, a, 0.0f, delta * kLog2e, 0.0f);
      worst = std::max(worst, std::fabs(got - want) / want /
                                  (2.4e-7 + std::fabs(da) * 1.2e-7));
    }
  }
  EXPECT_LE(worst, 1.0);
  EXPECT_EQ(ScanEntry(2.0f, -1.0f, 3.0f, 0.0f, 0.5f),
            3.5f);  // delta 0: h + dx b
}

// Over [-80, 40]: below that Exp's clamp shows (Softplus is 0 there).
TEST(OpMathTest, SoftplusSiluAndSigmoidFollowTheirDefinitions) {
  double worst_sp = 0, worst_silu = 0, worst_sig = 0;
  for (float x = -80.0f; x < 40.0f; x += 0.0137f) {
    const double xd = x;
    const double sp = xd > 20 ? xd : std::log1p(std::exp(xd));
    worst_sp = std::max(worst_sp, std::fabs(Softplus(x) - sp) / sp);
    const double sig = 1 / (1 + std::exp(-xd));
    worst_sig = std::max(worst_sig, std::fabs(Sigmoid(x) - sig) / sig);
    const double silu = xd * sig;
    worst_silu = std::max(worst_silu, std::fabs(Silu(x) - silu) /
                                          std::max(std::fabs(silu), 1e-30));
    worst_silu = std::max(worst_silu, std::fabs(SiluByExp(x) - silu) /
                                          std::max(std::fabs(silu), 1e-30));
  }
  // Relative: a few fp32 ulp (epsilon 1.2e-7).
  EXPECT_LT(worst_sp, 3e-7);
  EXPECT_LT(worst_sig, 8e-7);
  EXPECT_LT(worst_silu, 8e-7);
  EXPECT_EQ(Softplus(25.0f), 25.0f);
  EXPECT_GT(Softplus(-30.0f), 0.0f);
  // torch's threshold: x itself above 20.
  for (float x = 20.0f; x < 100.0f; x += 0.0173f) ASSERT_EQ(Softplus(x), x);
  EXPECT_EQ(Softplus(INFINITY), INFINITY);
  EXPECT_EQ(Softplus(-INFINITY), 0.0f);
  EXPECT_TRUE(std::isnan(Softplus(NAN)));
}

TEST(OpMathTest, ScanStepMatchesTheDefinition) {
  float h[3] = {0.5f, -1.0f, 2.0f};
  const float a[3] = {-1.0f, -2.0f, -0.5f}, b[3] = {0.1f, 0.2f, 0.3f},
              c[3] = {1.0f, -1.0f, 0.5f};
  const float dt_raw = 0.3f, dt_bias = -1.0f, x = 0.7f, d = 0.9f, z = 1.3f;
  double want_h[3], y = 0;
  const double delta = std::log1p(std::exp(double{dt_raw} + dt_bias));
  for (int i = 0; i < 3; ++i) {
    want_h[i] = std::exp(delta * a[i]) * h[i] + delta * b[i] * x;
    y += c[i] * want_h[i];
  }
  const double want = (y + d * x) * z / (1 + std::exp(-double{z}));
  EXPECT_NEAR(ScanStep(h, a, b, c, dt_raw, dt_bias, x, d, z, 3), want, 1e-6);
  for (int i = 0; i < 3; ++i) EXPECT_NEAR(h[i], want_h[i], 1e-6);
}

}  // namespace
}  // namespace seqboat::op_math
