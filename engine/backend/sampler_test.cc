#include "engine/backend/sampler.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

#include "engine/backend/sample_row.h"
#include "engine/backend/sampling_math.h"
#include "engine/backend/sampling_params.h"
#include "gtest/gtest.h"

namespace seqboat {
namespace {

// SampleRowsOnHost over m rows of n logits into tokens.
void DrawRows(const float* logits, int m, int n, float logit_scale,
              const SampleRow* rows, const int32_t* seen_ids, int32_t* tokens) {
  SampleRowsParams p;
  p.logits = logits;
  p.m = m;
  p.vocab = n;
  p.logit_scale = logit_scale;
  p.rows = rows;
  p.seen_ids = seen_ids;
  p.tokens = tokens;
  SampleRowsOnHost(p);
}

SamplingParams Params(float temperature, uint64_t seed = 1) {
  SamplingParams p;
  p.temperature = temperature;
  p.seed = seed;
  return p;
}

int32_t SampleOnce(const SamplingParams& params,
                   const std::vector<float>& logits, int32_t valid_vocab) {
  Sampler sampler(params, valid_vocab, false, 0);
  return sampler.Sample(logits.data(), static_cast<int32_t>(logits.size()),
                        nullptr);
}

// Counts of `draws` samples from one sampler (successive steps).
std::vector<int> Histogram(const SamplingParams& params,
                           const std::vector<float>& logits, int draws) {
  const int32_t n = static_cast<int32_t>(logits.size());
  Sampler sampler(params, n, false, 0);
  std::vector<int> counts(logits.size(), 0);
  for (int i = 0; i < draws; ++i) {
    const int32_t id = sampler.Sample(logits.data(), n, nullptr);
    EXPECT_GE(id, 0);
    EXPECT_LT(id, n);
    ++counts[static_cast<size_t>(id)];
  }
  return counts;
}

std::vector<double> Softmax(const std::vector<float>& logits, float t) {
  double max = -INFINITY;
  for (float l : logits) max = std::max<double>(max, l / t);
  std::vector<double> p;
  double sum = 0.0;
  for (float l : logits) {
    p.push_back(std::exp(l / t - max));
    sum += p.back();
  }
  for (double& x : p) x /= sum;
  return p;
}

// Logits whose softmax is exactly `probs`.
std::vector<float> LogitsFor(const std::vector<double>& probs) {
  std::vector<float> logits;
  for (double p : probs) logits.push_back(static_cast<float>(std::log(p)));
  return logits;
}

TEST(SamplerTest, GreedyPicksArgmaxWithTiesToLowestId) {
  EXPECT_EQ(SampleOnce(Params(0.0f), {0.1f, 2.0f, -3.0f, 1.9f}, 4), 1);
  EXPECT_EQ(SampleOnce(Params(0.0f), {1.0f, 5.0f, 5.0f, 5.0f}, 4), 1);
  EXPECT_EQ(SampleOnce(Params(0.0f), {-INFINITY, -INFINITY, -1.0f}, 3), 2);
  // A NaN logit never wins.
  EXPECT_EQ(SampleOnce(Params(0.0f), {0.0f, NAN, 1.0f}, 3), 2);
}

TEST(SamplerTest, PaddingIdsAreNeverChosen) {
  // Ids 3.. are padding rows with enormous logits.
  const std::vector<float> logits = {0.0f, 0.5f, 0.2f, 100.0f, 100.0f};
  EXPECT_EQ(SampleOnce(Params(0.0f), logits, 3), 1);
  for (uint64_t seed = 0; seed < 200; ++seed) {
    EXPECT_LT(SampleOnce(Params(1.5f, seed), logits, 3), 3);
  }
  Sampler sampler(Params(1.0f), 3, true, 10);
  TokenLogprobs lp;
  sampler.Sample(logits.data(), 5, &lp);
  ASSERT_EQ(lp.top.size(), 3u);  // clamped to the valid vocabulary
  for (const TokenLogprob& t : lp.top) EXPECT_LT(t.token_id, 3);
}

TEST(SamplerTest, TopKOneEqualsGreedy) {
  std::mt19937 rng(5);
  std::normal_distribution<float> normal(0.0f, 2.0f);
  for (int trial = 0; trial < 100; ++trial) {
    std::vector<float> logits(1000);
    for (float& l : logits) l = normal(rng);
    SamplingParams k1 = Params(1.3f, static_cast<uint64_t>(trial));
    k1.top_k = 1;
    EXPECT_EQ(SampleOnce(k1, logits, 1000),
              SampleOnce(Params(0.0f), logits, 1000));
  }
}

TEST(SamplerTest, SameSeedSameTokensDifferentSeedDifferentTokens) {
  std::vector<float> logits(100, 0.0f);  // uniform: every draw is random
  const auto run = [&](uint64_t seed) {
    Sampler sampler(Params(1.0f, seed), 100, false, 0);
    std::vector<int32_t> out;
    for (int i = 0; i < 64; ++i)
      out.push_back(sampler.Sample(logits.data(), 100, nullptr));
    return out;
  };
  EXPECT_EQ(run(7), run(7));
  EXPECT_NE(run(7), run(8));
  EXPECT_NE(run(0), run(1));
}

TEST(SamplerTest, FrequenciesMatchTemperedSoftmax) {
  const std::vector<float> logits = {1.0f, 0.0f, 2.0f, -1.0f, 0.5f, 1.5f};
  const float t = 0.8f;
  const int draws = 20000;
  const std::vector<int> counts = Histogram(Params(t, 2024), logits, draws);
  const std::vector<double> p = Softmax(logits, t);
  for (size_t i = 0; i < p.size(); ++i) {
    // Five standard deviations of a binomial proportion.
    const double sigma = std::sqrt(p[i] * (1.0 - p[i]) / draws);
    EXPECT_NEAR(counts[i] / static_cast<double>(draws), p[i], 5.0 * sigma)
        << "token " << i;
  }
}

TEST(SamplerTest, TopKKeepsExactlyTheKBest) {
  const std::vector<float> logits = {0.0f, 3.0f, 1.0f, 2.9f, 2.0f, -1.0f};
  SamplingParams params = Params(1.0f, 9);
  params.top_k = 3;  // ids 1, 3, 4
  const int draws = 20000;
  const std::vector<int> counts = Histogram(params, logits, draws);
  EXPECT_EQ(counts[0] + counts[2] + counts[5], 0);
  const std::vector<double> p = Softmax({3.0f, 2.9f, 2.0f}, 1.0f);
  EXPECT_NEAR(counts[1] / double(draws), p[0], 0.02);
  EXPECT_NEAR(counts[3] / double(draws), p[1], 0.02);
  EXPECT_NEAR(counts[4] / double(draws), p[2], 0.02);
}

TEST(SamplerTest, TopPKeepsSmallestSetReachingP) {
  // Sorted probabilities 0.5, 0.3, 0.15, 0.05 (ids shuffled).
  const std::vector<float> logits = LogitsFor({0.15, 0.5, 0.05, 0.3});
  const int draws = 20000;
  {
    SamplingParams params = Params(1.0f, 11);
    params.top_p = 0.75f;  // 0.5 < 0.75 <= 0.8: keeps ids 1 and 3
    const std::vector<int> counts = Histogram(params, logits, draws);
    EXPECT_EQ(counts[0] + counts[2], 0);
    EXPECT_NEAR(counts[1] / double(draws), 0.5 / 0.8, 0.02);
    EXPECT_NEAR(counts[3] / double(draws), 0.3 / 0.8, 0.02);
  }
  {
    SamplingParams params = Params(1.0f, 12);
    params.top_p = 0.9f;  // 0.8 < 0.9 <= 0.95: adds id 0
    const std::vector<int> counts = Histogram(params, logits, draws);
    EXPECT_EQ(counts[2], 0);
    EXPECT_GT(counts[0], 0);
    EXPECT_NEAR(counts[0] / double(draws), 0.15 / 0.95, 0.02);
  }
  {
    SamplingParams params = Params(1.0f, 13);
    params.top_p = 0.01f;  // below the best token: still keeps that one
    const std::vector<int> counts = Histogram(params, logits, 500);
    EXPECT_EQ(counts[1], 500);
  }
}

TEST(SamplerTest, MinPDropsTokensBelowFractionOfMax) {
  const std::vector<float> logits = LogitsFor({0.15, 0.5, 0.05, 0.3});
  SamplingParams params = Params(1.0f, 21);
  params.min_p = 0.2f;  // threshold 0.1: drops only id 2 (0.05)
  const int draws = 20000;
  const std::vector<int> counts = Histogram(params, logits, draws);
  EXPECT_EQ(counts[2], 0);
  EXPECT_NEAR(counts[0] / double(draws), 0.15 / 0.95, 0.02);
  EXPECT_NEAR(counts[1] / double(draws), 0.5 / 0.95, 0.02);
  EXPECT_NEAR(counts[3] / double(draws), 0.3 / 0.95, 0.02);

  params.min_p = 0.7f;  // threshold 0.35: only id 1 survives
  const std::vector<int> only = Histogram(params, logits, 500);
  EXPECT_EQ(only[1], 500);
}

TEST(SamplerTest, FiltersCompose) {
  // top-k 3 keeps {0.5, 0.3, 0.15}; top-p 0.9 of the renormalised
  // {0.526, 0.316, 0.158} keeps all three; min-p 0.5 then drops 0.15.
  const std::vector<float> logits = LogitsFor({0.15, 0.5, 0.05, 0.3});
  SamplingParams params = Params(1.0f, 31);
  params.top_k = 3;
  params.top_p = 0.9f;
  params.min_p = 0.5f;
  const std::vector<int> counts = Histogram(params, logits, 5000);
  EXPECT_EQ(counts[0] + counts[2], 0);
  EXPECT_GT(counts[1], 0);
  EXPECT_GT(counts[3], 0);
}

TEST(SamplerTest, RepetitionPenaltyChangesArgmax) {
  SamplingParams params = Params(0.0f);
  params.repetition_penalty = 1.5f;
  {
    // Positive logit divided: 2.0 -> 1.33 < 1.8.
    const std::vector<float> logits = {2.0f, 1.8f, -1.0f};
    Sampler sampler(params, 3, false, 0);
    EXPECT_EQ(sampler.Sample(logits.data(), 3, nullptr), 0);
    sampler.Observe(0);
    EXPECT_EQ(sampler.Sample(logits.data(), 3, nullptr), 1);
  }
  {
    // Negative logit multiplied: -1.0 -> -1.5 < -1.2.
    const std::vector<float> logits = {-1.0f, -1.2f, -5.0f};
    Sampler sampler(params, 3, false, 0);
    sampler.Observe(0);
    sampler.Observe(0);   // observing twice penalises once, like HF
    sampler.Observe(-4);  // ignored
    sampler.Observe(99);  // ignored
    EXPECT_EQ(sampler.Sample(logits.data(), 3, nullptr), 1);
  }
  {
    // Without a penalty, observing changes nothing.
    const std::vector<float> logits = {2.0f, 1.8f};
    Sampler sampler(Params(0.0f), 2, false, 0);
    sampler.Observe(0);
    EXPECT_EQ(sampler.Sample(logits.data(), 2, nullptr), 0);
  }
}

TEST(SamplerTest, RepetitionPenaltyAppliesWhenSampling) {
  // Two equal tokens; penalising id 0 shifts mass to id 1.
  const std::vector<float> logits = {1.0f, 1.0f};
  SamplingParams params = Params(1.0f, 41);
  params.repetition_penalty = 2.0f;  // id 0: 1.0 -> 0.5
  Sampler sampler(params, 2, false, 0);
  sampler.Observe(0);
  int ones = 0;
  const int draws = 20000;
  for (int i = 0; i < draws; ++i)
    ones += sampler.Sample(logits.data(), 2, nullptr);
  const double p1 = 1.0 / (1.0 + std::exp(-0.5));
  EXPECT_NEAR(ones / double(draws), p1, 0.02);
}

// OpenAI's penalties count generated tokens only: the prompt's do not
// count, and each further generation of a token costs frequency_penalty
// more, presence_penalty once.
TEST(SamplerTest, PresenceAndFrequencyPenaltiesCountGeneratedTokens) {
  SamplingParams params = Params(0.0f);
  params.presence_penalty = 0.4f;
  params.frequency_penalty = 0.2f;
  const std::vector<float> logits = {3.0f, 2.5f, 0.0f};
  Sampler sampler(params, 3, false, 0);
  sampler.Observe(0);  // a prompt token: no presence or frequency penalty
  EXPECT_EQ(sampler.Sample(logits.data(), 3, nullptr), 0);
  sampler.ObserveGenerated(0);  // id 0: 3.0 - 0.2 - 0.4 = 2.4 < 2.5
  EXPECT_EQ(sampler.Sample(logits.data(), 3, nullptr), 1);
  sampler.ObserveGenerated(1);  // id 1: 2.5 - 0.6 = 1.9 < 2.4
  EXPECT_EQ(sampler.Sample(logits.data(), 3, nullptr), 0);
  sampler.ObserveGenerated(0);  // id 0: 3.0 - 0.4 - 0.4 = 2.2
  EXPECT_EQ(sampler.Sample(logits.data(), 3, nullptr), 0);
  sampler.ObserveGenerated(0);  // id 0: 3.0 - 0.6 - 0.4 = 2.0
  EXPECT_EQ(sampler.Sample(logits.data(), 3, nullptr), 0);
  sampler.ObserveGenerated(0);  // id 0: 3.0 - 0.8 - 0.4 = 1.8 < 1.9
  EXPECT_EQ(sampler.Sample(logits.data(), 3, nullptr), 1);
  sampler.ObserveGenerated(-1);  // ignored
  sampler.ObserveGenerated(3);   // ignored
  EXPECT_EQ(sampler.Sample(logits.data(), 3, nullptr), 1);
}

TEST(SamplerTest, NegativePenaltiesRaiseGeneratedTokens) {
  const std::vector<float> logits = {1.0f, 1.2f};
  SamplingParams presence = Params(0.0f);
  presence.presence_penalty = -0.5f;  // id 0: 1.0 + 0.5 = 1.5 > 1.2
  Sampler p(presence, 2, false, 0);
  EXPECT_EQ(p.Sample(logits.data(), 2, nullptr), 1);
  p.ObserveGenerated(0);
  EXPECT_EQ(p.Sample(logits.data(), 2, nullptr), 0);

  SamplingParams frequency = Params(0.0f);
  frequency.frequency_penalty = -0.15f;  // 1.15 once, 1.3 twice
  Sampler f(frequency, 2, false, 0);
  f.ObserveGenerated(0);
  EXPECT_EQ(f.Sample(logits.data(), 2, nullptr), 1);
  f.ObserveGenerated(0);
  EXPECT_EQ(f.Sample(logits.data(), 2, nullptr), 0);
}

// vLLM's order: the repetition penalty (a ratio) before the frequency and
// presence penalties (differences).
TEST(SamplerTest, RepetitionPenaltyComesBeforeTheCountPenalties) {
  SamplingParams params = Params(0.0f);
  params.repetition_penalty = 2.0f;
  params.frequency_penalty = 0.5f;
  // id 0: 2.0 / 2 - 0.5 = 0.5 < 0.6; the other order, (2.0 - 0.5) / 2 =
  // 0.75, would keep id 0.
  const std::vector<float> logits = {2.0f, 0.6f};
  Sampler sampler(params, 2, false, 0);
  sampler.ObserveGenerated(0);
  EXPECT_EQ(sampler.Sample(logits.data(), 2, nullptr), 1);
  // And the penalised value is exactly that.
  EXPECT_EQ(sampling::PenalizeCount(sampling::PenalizeLogit(2.0f, 2.0f), 1,
                                    0.0f, 0.5f),
            0.5f);
  EXPECT_EQ(sampling::PenalizeCount(2.0f, 0, 1.0f, 1.0f), 2.0f);
  EXPECT_EQ(sampling::PenalizeCount(2.0f, 3, 0.25f, 0.5f), 0.25f);
  EXPECT_EQ(sampling::PenalizeCount(-INFINITY, 2, -1.0f, -1.0f), -INFINITY);
}

TEST(SamplerTest, FrequencyPenaltyAppliesWhenSampling) {
  // Two equal tokens; id 0 generated twice at 0.5 each: its logit 1.0 -> 0.0.
  const std::vector<float> logits = {1.0f, 1.0f};
  SamplingParams params = Params(1.0f, 43);
  params.frequency_penalty = 0.5f;
  Sampler sampler(params, 2, false, 0);
  sampler.ObserveGenerated(0);
  sampler.ObserveGenerated(0);
  int ones = 0;
  const int draws = 20000;
  for (int i = 0; i < draws; ++i)
    ones += sampler.Sample(logits.data(), 2, nullptr);
  const double p1 = 1.0 / (1.0 + std::exp(-1.0));
  EXPECT_NEAR(ones / double(draws), p1, 0.02);
}

TEST(SamplerTest, NonFinitePenaltiesAreOff) {
  SamplingParams params = Params(0.0f);
  params.presence_penalty = NAN;
  params.frequency_penalty = INFINITY;
  const std::vector<float> logits = {2.0f, 1.0f};
  Sampler sampler(params, 2, false, 0);
  for (int i = 0; i < 5; ++i) sampler.ObserveGenerated(0);
  EXPECT_EQ(sampler.Sample(logits.data(), 2, nullptr), 0);
  std::vector<int32_t> ids;
  const SampleRow row = sampler.DescribeNext(&ids);
  EXPECT_EQ(row.presence_penalty, 0.0f);
  EXPECT_EQ(row.frequency_penalty, 0.0f);
  EXPECT_EQ(row.counted_count, 0);
  EXPECT_TRUE(ids.empty());
}

TEST(SamplerTest, SuppressedIdsAreNeverDrawnUntilLifted) {
  const std::vector<float> logits = {0.5f, 3.0f, 2.0f, 1.0f};
  Sampler greedy(Params(0.0f), 4, true, 2);
  greedy.Suppress({1, 1, 7, -2});  // duplicates and outsiders are harmless
  TokenLogprobs lp;
  EXPECT_EQ(greedy.Sample(logits.data(), 4, &lp), 2);
  // Logprobs stay the model's: id 1 is still the likeliest.
  ASSERT_EQ(lp.top.size(), 2u);
  EXPECT_EQ(lp.top[0].token_id, 1);
  greedy.Suppress({1, 2});
  EXPECT_EQ(greedy.Sample(logits.data(), 4, nullptr), 3);
  greedy.Suppress({});
  EXPECT_EQ(greedy.Sample(logits.data(), 4, nullptr), 1);

  SamplingParams params = Params(1.0f, 51);
  params.top_k = 2;  // of what is left: ids 2 and 3
  Sampler sampled(params, 4, false, 0);
  sampled.Suppress({1});
  const int draws = 20000;
  std::vector<int> counts(4, 0);
  for (int i = 0; i < draws; ++i)
    ++counts[sampled.Sample(logits.data(), 4, nullptr)];
  EXPECT_EQ(counts[0] + counts[1], 0);
  EXPECT_NEAR(counts[2] / double(draws), 1.0 / (1.0 + std::exp(-1.0)), 0.02);
}

TEST(SamplerTest, LogprobsAreRawLogSoftmaxBestFirst) {
  const std::vector<float> logits = {0.5f, 2.0f, -1.0f, 2.0f, 0.0f, 7.0f};
  SamplingParams params = Params(0.3f, 5);  // processing must not matter
  params.repetition_penalty = 3.0f;
  params.top_k = 2;
  Sampler sampler(params, 5, true, 5);
  sampler.Observe(1);
  TokenLogprobs lp;
  const int32_t chosen = sampler.Sample(logits.data(), 6, &lp);

  const std::vector<double> p = Softmax({0.5f, 2.0f, -1.0f, 2.0f, 0.0f}, 1.0f);
  EXPECT_EQ(lp.chosen.token_id, chosen);
  EXPECT_NEAR(lp.chosen.logprob, std::log(p[chosen]), 1e-5);
  ASSERT_EQ(lp.top.size(), 5u);
  // Ties (ids 1 and 3) in id order.
  const int32_t order[] = {1, 3, 0, 4, 2};
  double total = 0.0;
  for (size_t i = 0; i < 5; ++i) {
    EXPECT_EQ(lp.top[i].token_id, order[i]);
    EXPECT_NEAR(lp.top[i].logprob, std::log(p[order[i]]), 1e-5);
    EXPECT_LE(lp.top[i].logprob, 0.0f);
    if (i > 0) {
      EXPECT_LE(lp.top[i].logprob, lp.top[i - 1].logprob);
    }
    total += std::exp(lp.top[i].logprob);
  }
  EXPECT_NEAR(total, 1.0, 1e-5);
}

TEST(SamplerTest, TopLogprobsOnLargeVocabularyMatchFullSort) {
  std::mt19937 rng(77);
  std::normal_distribution<float> normal(0.0f, 3.0f);
  std::vector<float> logits(50000);
  for (float& l : logits) l = normal(rng);
  Sampler sampler(Params(1.0f, 3), 50000, true, 20);
  TokenLogprobs lp;
  sampler.Sample(logits.data(), 50000, &lp);
  std::vector<int32_t> ids(50000);
  for (int32_t i = 0; i < 50000; ++i) ids[i] = i;
  std::sort(ids.begin(), ids.end(), [&](int32_t a, int32_t b) {
    return logits[a] > logits[b] || (logits[a] == logits[b] && a < b);
  });
  ASSERT_EQ(lp.top.size(), 20u);
  for (size_t i = 0; i < 20; ++i) EXPECT_EQ(lp.top[i].token_id, ids[i]);
}

TEST(SamplerTest, LogprobsOnlyWhenAsked) {
  const std::vector<float> logits = {1.0f, 2.0f};
  Sampler sampler(Params(0.0f), 2, false, 2);
  TokenLogprobs lp;
  lp.chosen.token_id = -7;
  EXPECT_EQ(sampler.Sample(logits.data(), 2, &lp), 1);
  EXPECT_EQ(lp.chosen.token_id, -7);
  EXPECT_TRUE(lp.top.empty());

  Sampler chosen_only(Params(0.0f), 2, true, 0);
  EXPECT_EQ(chosen_only.Sample(logits.data(), 2, &lp), 1);
  EXPECT_EQ(lp.chosen.token_id, 1);
  EXPECT_TRUE(lp.top.empty());
}

TEST(SamplerTest, DegenerateRowsDoNotCrash) {
  const std::vector<float> all_neg_inf(4, -INFINITY);
  Sampler sampler(Params(1.0f), 4, true, 2);
  TokenLogprobs lp;
  const int32_t id = sampler.Sample(all_neg_inf.data(), 4, &lp);
  EXPECT_GE(id, 0);
  EXPECT_LT(id, 4);
  EXPECT_EQ(lp.chosen.logprob, -INFINITY);

  Sampler empty(Params(1.0f), 0, false, 0);
  EXPECT_EQ(empty.Sample(all_neg_inf.data(), 4, nullptr), 0);
}

TEST(SamplerTest, InfiniteLogitTakesAllTheMass) {
  const std::vector<float> logits = {0.0f, INFINITY, 3.0f, INFINITY, -1.0f};
  for (uint64_t seed = 1; seed <= 20; ++seed) {
    SamplingParams p = Params(0.7f, seed);
    EXPECT_EQ(SampleOnce(p, logits, 5), 1) << seed;
    p.min_p = 0.1f;  // would otherwise drop every candidate: NaN weights
    EXPECT_EQ(SampleOnce(p, logits, 5), 1) << seed;
    p.top_p = 0.5f;
    p.top_k = 2;
    EXPECT_EQ(SampleOnce(p, logits, 5), 1) << seed;
  }
}

// The draw walks the k kept tokens best first, whatever order the selection
// left them in, so a backend that ranks them picks the same token.
TEST(SamplerTest, TopKDrawWalksTheKeptTokensBestFirst) {
  const std::vector<float> logits = {0.3f, 2.0f, -1.0f, 1.2f, 1.2f, 0.9f};
  const std::vector<int32_t> ranked = {1, 3, 4, 5};  // ties to the lower id
  for (uint64_t seed = 0; seed < 300; ++seed) {
    SamplingParams params = Params(0.7f, seed);
    params.top_k = 4;
    const double u =
        sampling::UniformFromBits(sampling::CounterRandom(seed, 0));
    const float inv_t = 1.0f / 0.7f;
    const float max_logit = logits[1] * inv_t;
    double total = 0.0;
    for (int32_t id : ranked)
      total += sampling::SoftmaxWeight(logits[id] * inv_t, max_logit);
    double cumulative = 0.0;
    int32_t want = ranked.back();
    for (int32_t id : ranked) {
      cumulative += sampling::SoftmaxWeight(logits[id] * inv_t, max_logit);
      if (cumulative > u * total) {
        want = id;
        break;
      }
    }
    EXPECT_EQ(SampleOnce(params, logits, 6), want) << "seed " << seed;
  }
}

TEST(SamplerTest, DescribeNextHoldsNormalisedParametersAndDistinctIds) {
  SamplingParams params = Params(0.5f, 77);
  params.top_k = -3;    // off
  params.top_p = 1.5f;  // off
  params.min_p = 2.0f;  // clamped to 1
  params.repetition_penalty = 1.3f;
  Sampler sampler(params, 10, false, 0);
  for (int32_t id : {4, 2, 4, -1, 10, 99, 7, 2}) sampler.Observe(id);
  std::vector<int32_t> seen = {123};  // rows index a shared array
  const SampleRow row = sampler.DescribeNext(&seen);
  EXPECT_EQ(row.temperature, 0.5f);
  EXPECT_EQ(row.top_k, 0);
  EXPECT_EQ(row.top_p, 1.0f);
  EXPECT_EQ(row.min_p, 1.0f);
  EXPECT_EQ(row.repetition_penalty, 1.3f);
  EXPECT_EQ(row.valid_vocab, 10);
  EXPECT_EQ(row.seed, 77u);
  EXPECT_EQ(row.step, 0u);
  EXPECT_EQ(row.seen_offset, 1);
  EXPECT_EQ(row.seen_count, 3);
  EXPECT_EQ(seen, (std::vector<int32_t>{123, 4, 2, 7}));

  sampler.CountDraw();
  EXPECT_EQ(sampler.step(), 1u);
  EXPECT_EQ(sampler.DescribeNext(&seen).step, 1u);

  // Generated ids: the repetition penalty's too, and (id, count) pairs
  // after the repetition ids, each id once, in first-generated order.
  params.presence_penalty = 0.5f;
  params.frequency_penalty = -0.25f;
  Sampler counted(params, 10, false, 0);
  counted.Observe(1);
  for (int32_t id : {4, 2, 4, -1, 10, 4, 1}) counted.ObserveGenerated(id);
  std::vector<int32_t> ids = {7, 7};
  const SampleRow crow = counted.DescribeNext(&ids);
  EXPECT_EQ(crow.presence_penalty, 0.5f);
  EXPECT_EQ(crow.frequency_penalty, -0.25f);
  EXPECT_EQ(crow.seen_offset, 2);
  EXPECT_EQ(crow.seen_count, 3);
  EXPECT_EQ(crow.counted_offset, 5);
  EXPECT_EQ(crow.counted_count, 3);
  EXPECT_EQ(ids, (std::vector<int32_t>{7, 7, 1, 4, 2, 4, 3, 2, 1, 1, 1}));
  EXPECT_EQ(crow.suppressed_offset, 11);
  EXPECT_EQ(crow.suppressed_count, 0);
  counted.Suppress({9, 3, 9, 12});
  ids.clear();
  const SampleRow srow = counted.DescribeNext(&ids);
  EXPECT_EQ(srow.suppressed_offset, 9);
  EXPECT_EQ(srow.suppressed_count, 2);
  EXPECT_EQ(ids, (std::vector<int32_t>{1, 4, 2, 4, 3, 2, 1, 1, 1, 9, 3}));

  // Greedy by top-k 1 or a tiny temperature reads as temperature 0; without
  // a penalty no ids are listed.
  SamplingParams greedy = Params(1.0f);
  greedy.top_k = 1;
  Sampler g(greedy, 10, false, 0);
  g.Observe(3);
  std::vector<int32_t> none;
  const SampleRow gr = g.DescribeNext(&none);
  EXPECT_EQ(gr.temperature, 0.0f);
  EXPECT_EQ(gr.seen_count, 0);
  EXPECT_TRUE(none.empty());
  EXPECT_EQ(
      Sampler(Params(1e-7f), 10, false, 0).DescribeNext(&none).temperature,
      0.0f);
}

// A sampler fed by DescribeNext / SampleRowsOnHost / CountDraw draws the
// same tokens as one that samples itself, step after step: same step
// counter, same penalised ids.
TEST(SamplerTest, DrawsMadeElsewhereKeepTheSamplerInStep) {
  std::vector<SamplingParams> cases;
  cases.push_back(Params(0.0f));
  cases.push_back(Params(1.0f, 5));
  for (int i = 0; i < 6; ++i) {
    SamplingParams p = Params(0.6f + 0.2f * i, 100 + i);
    if (i % 2 == 0) p.top_k = 3 + 5 * i;
    if (i % 3 == 0) p.top_p = 0.8f;
    if (i % 3 == 1) p.min_p = 0.05f;
    if (i >= 3) p.repetition_penalty = 1.4f;
    cases.push_back(p);
  }
  SamplingParams penalised_greedy = Params(0.0f);
  penalised_greedy.repetition_penalty = 2.0f;
  cases.push_back(penalised_greedy);
  SamplingParams counted_greedy = Params(0.0f);
  counted_greedy.presence_penalty = 1.0f;
  counted_greedy.frequency_penalty = 0.5f;
  cases.push_back(counted_greedy);
  SamplingParams counted = Params(0.8f, 120);
  counted.presence_penalty = -0.5f;
  counted.frequency_penalty = 1.5f;
  counted.repetition_penalty = 1.1f;
  counted.top_k = 30;
  cases.push_back(counted);
  SamplingParams suppressing = Params(0.9f, 130);
  suppressing.top_p = 0.9f;
  cases.push_back(suppressing);
  cases.push_back(Params(0.0f));  // greedy, suppressing

  const int32_t n = 300;
  std::mt19937 rng(3);
  std::normal_distribution<float> normal(0.0f, 2.0f);
  for (size_t c = 0; c < cases.size(); ++c) {
    Sampler self(cases[c], n - 20, false, 0);  // 20 padding ids
    Sampler fed(cases[c], n - 20, false, 0);
    for (int32_t id : {5, 9, 5, 200}) {
      self.Observe(id);
      fed.Observe(id);
    }
    if (c + 2 >= cases.size()) {
      // The best ids of most rows, held back for the first steps.
      std::vector<int32_t> held;
      for (int32_t id = 0; id < n - 20; id += 2) held.push_back(id);
      self.Suppress(held);
      fed.Suppress(held);
    }
    for (int step = 0; step < 40; ++step) {
      std::vector<float> logits(n);
      for (float& l : logits) l = normal(rng);
      const int32_t want = self.Sample(logits.data(), n, nullptr);
      std::vector<int32_t> seen = {-5};  // another row's ids come first
      const SampleRow row = fed.DescribeNext(&seen);
      int32_t got = -1;
      DrawRows(logits.data(), 1, n, 1.0f, &row, seen.data(), &got);
      fed.CountDraw();
      ASSERT_EQ(got, want) << "case " << c << " step " << step;
      if (c + 2 >= cases.size() && step < 20) {
        EXPECT_EQ(got % 2, 1);
      }
      if (step == 19) {
        self.Suppress({});
        fed.Suppress({});
      }
      self.ObserveGenerated(want);
      fed.ObserveGenerated(got);
      EXPECT_EQ(fed.step(), self.step());
    }
  }
}

TEST(SamplerTest, SampleRowsOnHostScalesAndKeepsRowsApart) {
  const int32_t n = 50;
  std::mt19937 rng(8);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<float> logits(3 * n), scaled;
  for (float& l : logits) l = normal(rng);
  for (float l : logits) scaled.push_back(l * 2.5f);
  std::vector<SampleRow> rows;
  std::vector<int32_t> seen;
  for (int j = 0; j < 3; ++j) {
    SamplingParams p = Params(j == 0 ? 0.0f : 0.9f, 40 + j);
    p.repetition_penalty = 1.5f;
    Sampler s(p, n, false, 0);
    s.Observe(j);
    s.Observe(10 + j);
    rows.push_back(s.DescribeNext(&seen));
  }
  int32_t got[3], want[3];
  DrawRows(logits.data(), 3, n, 2.5f, rows.data(), seen.data(), got);
  DrawRows(scaled.data(), 3, n, 1.0f, rows.data(), seen.data(), want);
  for (int j = 0; j < 3; ++j) {
    EXPECT_EQ(got[j], want[j]) << "row " << j;
    SamplingParams p = Params(j == 0 ? 0.0f : 0.9f, 40 + j);
    p.repetition_penalty = 1.5f;
    Sampler s(p, n, false, 0);
    s.Observe(j);
    s.Observe(10 + j);
    EXPECT_EQ(s.Sample(scaled.data() + j * n, n, nullptr), want[j]);
  }
}

}  // namespace
}  // namespace seqboat
