#include "engine/speculative/prompt_lookup.h"

#include <random>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace seqboat {
namespace {

using ::testing::ElementsAre;
using ::testing::IsEmpty;

TEST(PromptLookupTest, DraftsWhatFollowedTheLatestOccurrence) {
  PromptLookup lookup(2, 3);
  lookup.Append({1, 2, 3, 4, 5, 9, 2, 3, 7, 8, 1, 2, 3});
  // "1 2 3" last occurred at the start (followed by 4 5); the longer match
  // wins over "2 3", whose latest occurrence is followed by 7 8.
  EXPECT_THAT(lookup.Draft(2), ElementsAre(4, 5));
  lookup.Append(6);
  EXPECT_THAT(lookup.Draft(4), IsEmpty());  // "3 6" never occurred
}

TEST(PromptLookupTest, ShorterGramWhenTheLongerNeverOccurred) {
  PromptLookup lookup(2, 4);
  lookup.Append({5, 2, 3, 7, 8, 9, 1, 2, 3});
  EXPECT_THAT(lookup.Draft(3), ElementsAre(7, 8, 9));
  EXPECT_THAT(lookup.Draft(0), IsEmpty());
}

TEST(PromptLookupTest, DraftStopsAtTheContextsEnd) {
  PromptLookup lookup(1, 2);
  lookup.Append({4, 4, 4});
  // "4 4" ending at 2 is followed by the last 4 only.
  EXPECT_THAT(lookup.Draft(5), ElementsAre(4));
  PromptLookup single(1, 1);
  single.Append(7);
  EXPECT_THAT(single.Draft(5), IsEmpty());
}

TEST(PromptLookupTest, PrefersTheLongestContinuationThenTheLatest) {
  PromptLookup lookup(2, 2);
  lookup.Append({1, 2, 9, 9, 1, 2, 5, 1, 2});
  // "1 2" ends at 2 (7 tokens follow) and at 6 (3 follow): both hold a
  // draft of 3, so the latest wins; only the older holds one of 4.
  EXPECT_THAT(lookup.Draft(3), ElementsAre(5, 1, 2));
  EXPECT_THAT(lookup.Draft(4), ElementsAre(9, 9, 1, 2));
  // A loop of one token: its latest occurrence offers one token, the
  // oldest all that was asked.
  PromptLookup loop(2, 3);
  loop.Append({3, 7, 7, 7, 7, 7, 7, 7});
  EXPECT_THAT(loop.Draft(4), ElementsAre(7, 7, 7, 7));
  EXPECT_THAT(loop.Draft(1), ElementsAre(7));
}

// Against a brute-force search on random short-alphabet contexts: the longest
// n, then of its occurrences the one with the most tokens after it (up to
// the draft's length), then the latest, then its successors.
TEST(PromptLookupTest, MatchesBruteForce) {
  std::mt19937 rng(7);
  for (int trial = 0; trial < 300; ++trial) {
    PromptLookup lookup(2, 4);
    std::vector<int32_t> ctx;
    const int len = 1 + static_cast<int>(rng() % 80);
    const int alphabet = 2 + trial % 3;
    for (int i = 0; i < len; ++i) {
      ctx.push_back(static_cast<int32_t>(rng() % alphabet));
      lookup.Append(ctx.back());
      const int l = static_cast<int>(ctx.size());
      for (int k = 0; k <= 6; ++k) {
        std::vector<int32_t> want;
        for (int n = std::min(4, l); n >= 2 && want.empty() && k > 0; --n) {
          int best = -1;
          for (int end = n; end < l; ++end) {
            if (!std::equal(ctx.begin() + end - n, ctx.begin() + end,
                            ctx.begin() + l - n)) {
              continue;
            }
            if (best < 0 || std::min(k, l - end) >= std::min(k, l - best))
              best = end;
          }
          if (best >= 0)
            want.assign(ctx.begin() + best,
                        ctx.begin() + std::min(l, best + k));
        }
        ASSERT_EQ(lookup.Draft(k), want)
            << "trial " << trial << " len " << l << " k " << k;
      }
    }
  }
}

}  // namespace
}  // namespace seqboat
