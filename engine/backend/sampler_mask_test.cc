// The Sampler under an allowed-token bitmask (a grammar's next tokens).
#include <cmath>
#include <cstdint>
#include <vector>

#include "engine/backend/sampler.h"
#include "engine/backend/sampling_params.h"
#include "engine/backend/token_bitmask.h"
#include "gtest/gtest.h"

namespace seqboat {
namespace {

SamplingParams Params(float temperature, uint64_t seed = 0) {
  SamplingParams p;
  p.temperature = temperature;
  p.seed = seed;
  return p;
}

std::vector<uint32_t> Allow(int32_t vocab, const std::vector<int32_t>& ids) {
  std::vector<uint32_t> words(TokenBitmaskWords(vocab), 0u);
  for (int32_t id : ids) TokenBitmaskSet(words.data(), id);
  return words;
}

TEST(SamplerMaskTest, GreedyTakesTheBestAllowedIdUntilLifted) {
  const std::vector<float> logits = {0.0f, 5.0f, 1.0f, 3.0f, 4.0f};
  Sampler sampler(Params(0.0f), 5, false, 0);
  const std::vector<uint32_t> mask = Allow(5, {0, 2, 3});
  sampler.SetAllowedMask(mask.data());
  EXPECT_TRUE(sampler.has_allowed_mask());
  EXPECT_EQ(sampler.Sample(logits.data(), 5, nullptr), 3);
  sampler.SetAllowedMask(nullptr);
  EXPECT_EQ(sampler.Sample(logits.data(), 5, nullptr), 1);
}

TEST(SamplerMaskTest, DrawsStayInsideTheMaskAcrossWords) {
  // 70 ids: the mask spans three words; the allowed ids have the lowest
  // logits, so only the mask keeps the draw on them.
  const int32_t vocab = 70;
  std::vector<float> logits(vocab, 10.0f);
  const std::vector<int32_t> allowed = {0, 31, 32, 63, 64, 69};
  for (int32_t id : allowed) logits[id] = -5.0f;
  const std::vector<uint32_t> mask = Allow(vocab, allowed);
  std::vector<int> seen(vocab, 0);
  for (uint64_t seed = 0; seed < 300; ++seed) {
    SamplingParams p = Params(1.0f, seed);
    p.top_k = 40;
    p.top_p = 0.9f;
    Sampler sampler(p, vocab, true, 3);
    sampler.SetAllowedMask(mask.data());
    TokenLogprobs lp;
    const int32_t id = sampler.Sample(logits.data(), vocab, &lp);
    ASSERT_TRUE(TokenBitmaskHas(mask.data(), id)) << id;
    ++seen[id];
    // Logprobs are the model's own: the best rivals are masked-out ids.
    ASSERT_FALSE(lp.top.empty());
    EXPECT_FALSE(TokenBitmaskHas(mask.data(), lp.top[0].token_id));
  }
  for (int32_t id : allowed) EXPECT_GT(seen[id], 0) << id;
}

TEST(SamplerMaskTest, AllAllowedIdsImpossibleStillYieldsAnAllowedId) {
  const std::vector<float> logits = {1.0f, -INFINITY, NAN, 2.0f};
  const std::vector<uint32_t> mask = Allow(4, {1, 2});
  for (float temperature : {0.0f, 0.7f}) {
    Sampler sampler(Params(temperature), 4, false, 0);
    sampler.SetAllowedMask(mask.data());
    EXPECT_EQ(sampler.Sample(logits.data(), 4, nullptr), 1) << temperature;
  }
}

TEST(SamplerMaskTest, MaskAndSuppressionCompose) {
  const std::vector<float> logits = {0.0f, 5.0f, 4.0f, 3.0f};
  Sampler sampler(Params(0.0f), 4, false, 0);
  const std::vector<uint32_t> mask = Allow(4, {0, 2, 3});
  sampler.SetAllowedMask(mask.data());
  sampler.Suppress({2});
  EXPECT_EQ(sampler.Sample(logits.data(), 4, nullptr), 3);
}

}  // namespace
}  // namespace seqboat
