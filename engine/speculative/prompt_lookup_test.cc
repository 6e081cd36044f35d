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

// Against a brute-force search on random short-alphabet contexts: the longest
// n, then the latest occurrence, then its successors.
TEST(PromptLookupTest, MatchesBruteForce) {
  std::mt19937 rng(7);
  for (int trial = 0; trial < 200; ++trial) {
    PromptLookup lookup(2, 4);
    std::vector<int32_t> ctx;
    const int len = 1 + static_cast<int>(rng() % 60);
    for (int i = 0; i < len; ++i) {
      ctx.push_back(static_cast<int32_t>(rng() % 3));
      lookup.Append(ctx.back());
      std::vector<int32_t> want;
      const int l = static_cast<int>(ctx.size());
      for (int n = std::min(4, l); n >= 2 && want.empty(); --n) {
        for (int end = l - 1; end >= n; --end) {
          if (std::equal(ctx.begin() + end - n, ctx.begin() + end,
                         ctx.begin() + l - n)) {
            want.assign(ctx.begin() + end, ctx.begin() + std::min(l, end + 3));
            break;
          }
        }
      }
      ASSERT_EQ(lookup.Draft(3), want) << "trial " << trial << " len " << l;
    }
  }
}

}  // namespace
}  // namespace seqboat
