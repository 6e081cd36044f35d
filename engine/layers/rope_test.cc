// RoPE frequencies per rope_scaling type (MODELS.md §10). The blended pairs
// of llama3 and yarn are compared with values transformers 4.48.3 printed
// (ROPE_INIT_FUNCTIONS on the same settings); the rest are properties the
// formulas guarantee.
#include "engine/layers/rope.h"

#include <cmath>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "engine/backend/attention_math.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace seqboat {
namespace {

using ::testing::HasSubstr;

std::vector<float> Plain(int head_dim, double theta) {
  std::vector<float> f(head_dim / 2);
  for (int i = 0; i < head_dim / 2; ++i) {
    f[i] = attention_math::RopeInvFreq(i, head_dim, static_cast<float>(theta));
  }
  return f;
}

RopeScaling Llama31() {
  RopeScaling s;
  s.type = RopeScalingType::kLlama3;
  s.factor = 8.0;
  s.low_freq_factor = 1.0;
  s.high_freq_factor = 4.0;
  s.original_max_position_embeddings = 8192;
  return s;
}

RopeScaling Yarn() {
  RopeScaling s;
  s.type = RopeScalingType::kYarn;
  s.factor = 4.0;
  s.original_max_position_embeddings = 2048;
  s.beta_fast = 32.0;
  s.beta_slow = 1.0;
  s.attention_factor = 0.1 * std::log(4.0) + 1.0;
  return s;
}

TEST(RopeTest, NoneAndDynamicArePlainRope) {
  const std::vector<float> plain = Plain(64, 10000.0);
  EXPECT_EQ(RopeInvFreqs(RopeScaling(), 64, 10000.0), plain);
  RopeScaling dynamic;
  dynamic.type = RopeScalingType::kDynamic;
  dynamic.factor = 4.0;
  dynamic.max_position_embeddings = 256;
  EXPECT_EQ(RopeInvFreqs(dynamic, 64, 10000.0), plain);
  EXPECT_EQ(RopeAttentionScaling(dynamic), 1.0f);
}

TEST(RopeTest, LinearDividesEveryFrequency) {
  RopeScaling s;
  s.type = RopeScalingType::kLinear;
  s.factor = 3.0;
  const std::vector<float> plain = Plain(16, 500000.0);
  const std::vector<float> got = RopeInvFreqs(s, 16, 500000.0);
  ASSERT_EQ(got.size(), 8u);
  for (int i = 0; i < 8; ++i) EXPECT_EQ(got[i], plain[i] / 3.0f) << i;
}

// Llama-3.1-8B: d_h 128, θ 5e5. Pairs 0..28 are high frequency (kept), 35..63
// low frequency (divided by 8), 29..34 blended.
TEST(RopeTest, Llama3KeepsHighDividesLowBlendsBetween) {
  const std::vector<float> plain = Plain(128, 500000.0);
  const std::vector<float> got = RopeInvFreqs(Llama31(), 128, 500000.0);
  for (int i = 0; i <= 28; ++i) EXPECT_EQ(got[i], plain[i]) << i;
  for (int i = 35; i < 64; ++i) EXPECT_EQ(got[i], plain[i] / 8.0f) << i;
  // transformers 4.48.3, _compute_llama3_parameters, pairs 29..34.
  const float hf[] = {0.00216657063f,  0.00137189368f, 0.00085675146f,
                      0.000524846022f, 0.00031269365f, 0.000178507791f};
  for (int i = 29; i <= 34; ++i) {
    EXPECT_LT(got[i], plain[i]) << i;
    EXPECT_GT(got[i], plain[i] / 8.0f) << i;
    EXPECT_FLOAT_EQ(got[i], hf[i - 29]) << i;
  }
}

// d_h 64, θ 1e4, L 2048: the correction range is pairs 8 .. 21.
TEST(RopeTest, YarnRampsBetweenTheCorrectionRange) {
  const std::vector<float> plain = Plain(64, 10000.0);
  const std::vector<float> got = RopeInvFreqs(Yarn(), 64, 10000.0);
  for (int i = 0; i <= 8; ++i) EXPECT_EQ(got[i], plain[i]) << i;
  for (int i = 21; i < 32; ++i) EXPECT_FLOAT_EQ(got[i], plain[i] / 4.0f) << i;
  // transformers 4.48.3, _compute_yarn_parameters, pairs 9..20.
  const float hf[] = {0.070663102f,   0.0497455746f,  0.0348710567f,
                      0.0243252143f,  0.0168732349f,  0.0116272122f,
                      0.00794983935f, 0.00538461516f, 0.00360526075f,
                      0.00237913639f, 0.00154081406f, 0.000973008573f};
  for (int i = 9; i <= 20; ++i) {
    EXPECT_LT(got[i], plain[i]) << i;
    EXPECT_GT(got[i], plain[i] / 4.0f) << i;
    EXPECT_FLOAT_EQ(got[i], hf[i - 9]) << i;
  }
  EXPECT_FLOAT_EQ(RopeAttentionScaling(Yarn()), 1.1386294f);
}

TEST(RopeTest, TableHoldsScaledCosSinPerPosition) {
  const RopeScaling s = Yarn();
  const float m = RopeAttentionScaling(s);
  const std::vector<float> f = RopeInvFreqs(s, 8, 10000.0);
  const RopeTable t = MakeRopeTable(s, 8, 8, 10000.0, 5);
  ASSERT_EQ(t.cos.size(), 20u);
  ASSERT_EQ(t.sin.size(), 20u);
  for (int i = 0; i < 4; ++i) {
    EXPECT_EQ(t.cos[i], m);
    EXPECT_EQ(t.sin[i], 0.0f);
    EXPECT_EQ(t.cos[3 * 4 + i], std::cos(3.0f * f[i]) * m);
    EXPECT_EQ(t.sin[3 * 4 + i], std::sin(3.0f * f[i]) * m);
  }
}

// Bamba's shape scaled down: d_h 16, half of it rotated. The rotated pairs
// take the frequencies of a 8-channel RoPE (transformers' inv_freq over
// int(head_dim * partial_rotary_factor)); the passed pairs are the identity,
// unscaled even under yarn, which scales only the rotated channels.
TEST(RopeTest, PartialRotaryRotatesTheFirstPairsOnly) {
  const RopeScaling s = Yarn();
  const float m = RopeAttentionScaling(s);
  const std::vector<float> f = RopeInvFreqs(s, 8, 10000.0);
  ASSERT_EQ(f.size(), 4u);
  const RopeTable t = MakeRopeTable(s, 16, 8, 10000.0, 6);
  ASSERT_EQ(t.cos.size(), 48u);
  for (int p = 0; p < 6; ++p) {
    for (int i = 0; i < 8; ++i) {
      if (i < 4) {
        EXPECT_EQ(t.cos[p * 8 + i], std::cos(p * f[i]) * m) << p << " " << i;
        EXPECT_EQ(t.sin[p * 8 + i], std::sin(p * f[i]) * m) << p << " " << i;
      } else {
        EXPECT_EQ(t.cos[p * 8 + i], 1.0f) << p << " " << i;
        EXPECT_EQ(t.sin[p * 8 + i], 0.0f) << p << " " << i;
      }
    }
  }
}

// The backends pair channel i with i + d_h/2. With d_h 12 and 4 channels
// rotated, the checkpoint's pairs (0, 2) and (1, 3) must sit at (0, 6) and
// (1, 7), and channels 4..11 fill pairs 2..5.
TEST(RopeTest, SourceChannelsLineUpTheCheckpointsPairs) {
  std::vector<int> got;
  for (int e = 0; e < 12; ++e) got.push_back(RopeSourceChannel(e, 12, 4));
  EXPECT_EQ(got, (std::vector<int>{0, 1, 4, 5, 6, 7, 2, 3, 8, 9, 10, 11}));
  for (int e = 0; e < 16; ++e) EXPECT_EQ(RopeSourceChannel(e, 16, 16), e);
  // Nothing rotated but a pair: still a permutation.
  std::vector<int> seen(10, 0);
  for (int e = 0; e < 10; ++e) ++seen[RopeSourceChannel(e, 10, 2)];
  EXPECT_EQ(seen, std::vector<int>(10, 1));
}

std::string Problem(const RopeScaling& s, double rope_theta) {
  return std::string(CheckRopeScaling(s, rope_theta).message());
}

TEST(RopeTest, CheckNamesTheBadField) {
  EXPECT_TRUE(CheckRopeScaling(RopeScaling(), 10000.0).ok());
  EXPECT_TRUE(CheckRopeScaling(Llama31(), 500000.0).ok());
  EXPECT_TRUE(CheckRopeScaling(Yarn(), 10000.0).ok());

  RopeScaling s = Llama31();
  s.factor = 0.5;
  EXPECT_THAT(Problem(s, 500000.0), HasSubstr("factor"));
  s = Llama31();
  s.high_freq_factor = s.low_freq_factor;
  EXPECT_THAT(Problem(s, 500000.0), HasSubstr("high_freq_factor"));
  s = Yarn();
  s.beta_slow = 64.0;
  EXPECT_THAT(Problem(s, 10000.0), HasSubstr("beta_slow"));
  EXPECT_THAT(Problem(Yarn(), 1.0), HasSubstr("rope_theta > 1"));
  RopeScaling dynamic;
  dynamic.type = RopeScalingType::kDynamic;
  dynamic.factor = 2.0;
  EXPECT_THAT(Problem(dynamic, 10000.0), HasSubstr("max_position_embeddings"));
}

}  // namespace
}  // namespace seqboat
