#include "clients/load/workload.h"

#include <cmath>
#include <set>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace seqboat {
namespace load {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

TEST(PromptsJsonlTest, TextAndTokenIdsWithOptionalMaxNewTokens) {
  auto prompts = ParsePromptsJsonl(
      "{\"text\": \"hello\"}\n"
      "\n"
      "{\"token_ids\": [1, 2, 3], \"max_new_tokens\": 7}\n");
  ASSERT_TRUE(prompts.ok()) << prompts.status();
  ASSERT_EQ(prompts->size(), 2u);
  EXPECT_EQ((*prompts)[0].text, "hello");
  EXPECT_FALSE((*prompts)[0].max_new_tokens.has_value());
  EXPECT_THAT((*prompts)[1].token_ids, ElementsAre(1, 2, 3));
  EXPECT_EQ((*prompts)[1].max_new_tokens, 7);
}

TEST(PromptsJsonlTest, ErrorsNameTheLine) {
  for (const char* bad :
       {"{\"text\": \"a\"}\nnot json\n", "{\"text\": \"a\"}\n[1]\n",
        "{\"text\": \"a\"}\n{\"text\": \"b\", \"token_ids\": [1]}\n",
        "{\"text\": \"a\"}\n{\"token_ids\": [-1]}\n",
        "{\"text\": \"a\"}\n{\"token_ids\": []}\n",
        "{\"text\": \"a\"}\n{\"text\": 5}\n",
        "{\"text\": \"a\"}\n{\"text\": \"b\", \"max_new_tokens\": 0}\n"}) {
    auto prompts = ParsePromptsJsonl(bad);
    ASSERT_FALSE(prompts.ok()) << bad;
    EXPECT_THAT(prompts.status().message(), HasSubstr("line 2")) << bad;
  }
  EXPECT_FALSE(ParsePromptsJsonl("\n\n").ok());
}

TEST(SyntheticTest, FixedLengthsAndIdsInVocabulary) {
  SyntheticSpec spec;
  spec.input_len = 16;
  spec.output_len = 5;
  spec.vocab_size = 10;
  spec.seed = 3;
  for (int i = 0; i < 20; ++i) {
    const Prompt p = SyntheticPrompt(spec, i);
    EXPECT_EQ(p.token_ids.size(), 16u);
    EXPECT_EQ(p.max_new_tokens, 5);
    for (int32_t id : p.token_ids) {
      EXPECT_GE(id, 0);
      EXPECT_LT(id, 10);
    }
  }
}

TEST(SyntheticTest, SameSeedSamePromptsDifferentSeedDifferent) {
  SyntheticSpec spec;
  spec.vocab_size = 1000;
  spec.seed = 1;
  EXPECT_EQ(SyntheticPrompt(spec, 5).token_ids,
            SyntheticPrompt(spec, 5).token_ids);
  EXPECT_NE(SyntheticPrompt(spec, 5).token_ids,
            SyntheticPrompt(spec, 6).token_ids);
  SyntheticSpec other = spec;
  other.seed = 2;
  EXPECT_NE(SyntheticPrompt(spec, 5).token_ids,
            SyntheticPrompt(other, 5).token_ids);
}

TEST(SyntheticTest, UniformRangeCoversBothEnds) {
  SyntheticSpec spec;
  spec.input_len = 10;
  spec.output_len = 10;
  spec.range_ratio = 0.2;  // lengths 8..12
  std::set<size_t> in_lens;
  std::set<int32_t> out_lens;
  for (int i = 0; i < 400; ++i) {
    const Prompt p = SyntheticPrompt(spec, i);
    in_lens.insert(p.token_ids.size());
    out_lens.insert(*p.max_new_tokens);
  }
  EXPECT_EQ(in_lens, (std::set<size_t>{8, 9, 10, 11, 12}));
  EXPECT_EQ(out_lens, (std::set<int32_t>{8, 9, 10, 11, 12}));
}

TEST(SyntheticTest, Validation) {
  SyntheticSpec spec;
  EXPECT_TRUE(ValidateSyntheticSpec(spec).ok());
  spec.range_ratio = 1.0;
  EXPECT_FALSE(ValidateSyntheticSpec(spec).ok());
  spec.range_ratio = 0;
  spec.input_len = 0;
  EXPECT_FALSE(ValidateSyntheticSpec(spec).ok());
}

TEST(PoissonArrivalsTest, RepeatableIncreasingWithTheRightMean) {
  PoissonArrivals a(4.0, 9), b(4.0, 9);
  double last = 0;
  const int n = 20000;
  double t = 0;
  for (int i = 0; i < n; ++i) {
    t = a.Next();
    EXPECT_EQ(t, b.Next());
    EXPECT_GE(t, last);
    last = t;
  }
  // Mean gap 1/4 s; 20000 gaps give a standard error of 0.25/sqrt(20000).
  EXPECT_NEAR(t / n, 0.25, 0.01);
}

TEST(PoissonArrivalsTest, InfiniteRateArrivesAtOnce) {
  PoissonArrivals a(INFINITY, 1);
  EXPECT_EQ(a.Next(), 0);
  EXPECT_EQ(a.Next(), 0);
}

}  // namespace
}  // namespace load
}  // namespace seqboat
