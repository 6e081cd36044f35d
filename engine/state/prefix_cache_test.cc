#include "engine/state/prefix_cache.h"

#include <algorithm>
#include <cstdint>
#include <memory>
#include <vector>

#include "gtest/gtest.h"

namespace seqboat {
namespace {

PrefixSnapshot Snap(std::vector<int32_t> tokens, size_t state_bytes,
                    uint8_t fill = 7) {
  PrefixSnapshot s;
  s.tokens = std::move(tokens);
  std::shared_ptr<uint8_t> block(new uint8_t[state_bytes],
                                 std::default_delete<uint8_t[]>());
  std::fill(block.get(), block.get() + state_bytes, fill);
  s.state = std::move(block);
  s.state_bytes = static_cast<int64_t>(state_bytes);
  return s;
}

std::vector<int32_t> Range(int32_t from, int32_t to) {
  std::vector<int32_t> v;
  for (int32_t i = from; i < to; ++i) v.push_back(i);
  return v;
}

TEST(PrefixCacheTest, FindsTheLongestTokenExactPrefix) {
  PrefixCache cache(1 << 20);
  ASSERT_TRUE(cache.Insert(Snap(Range(0, 4), 16, 1)));
  ASSERT_TRUE(cache.Insert(Snap(Range(0, 8), 16, 2)));
  ASSERT_TRUE(cache.Insert(Snap(Range(0, 12), 16, 3)));

  auto hit = cache.Lookup(Range(0, 10), 10);
  ASSERT_NE(hit, nullptr);
  EXPECT_EQ(hit->tokens, Range(0, 8));
  EXPECT_EQ(hit->state.get()[0], 2);

  // The longest match is capped by max_len (a request must still prefill
  // at least one token to get logits).
  hit = cache.Lookup(Range(0, 12), 11);
  ASSERT_NE(hit, nullptr);
  EXPECT_EQ(hit->tokens.size(), 8u);

  // One token differs inside the 8-token prefix: only the 4-token one fits.
  std::vector<int32_t> other = Range(0, 10);
  other[5] = 99;
  hit = cache.Lookup(other, 10);
  ASSERT_NE(hit, nullptr);
  EXPECT_EQ(hit->tokens.size(), 4u);

  // Nothing matches a prompt that differs in its first token.
  EXPECT_EQ(cache.Lookup({42, 1, 2, 3, 4}, 5), nullptr);

  const PrefixCacheStats st = cache.Stats();
  EXPECT_EQ(st.snapshots, 3);
  EXPECT_EQ(st.queries, 10 + 12 + 10 + 5);
  EXPECT_EQ(st.hits, 8 + 8 + 4);
}

TEST(PrefixCacheTest, EvictsLeastRecentlyUsedWithinTheBudget) {
  // Each snapshot: 4 tokens (16 bytes) + 84 state bytes = 100 bytes.
  PrefixCache cache(300);
  ASSERT_TRUE(cache.Insert(Snap({1, 1, 1, 1}, 84)));
  ASSERT_TRUE(cache.Insert(Snap({2, 2, 2, 2}, 84)));
  ASSERT_TRUE(cache.Insert(Snap({3, 3, 3, 3}, 84)));
  EXPECT_EQ(cache.Stats().bytes, 300);
  // Using the oldest makes the second the least recently used.
  ASSERT_NE(cache.Lookup({1, 1, 1, 1, 5}, 5), nullptr);
  ASSERT_TRUE(cache.Insert(Snap({4, 4, 4, 4}, 84)));
  EXPECT_TRUE(cache.Contains({1, 1, 1, 1}));
  EXPECT_FALSE(cache.Contains({2, 2, 2, 2}));
  EXPECT_TRUE(cache.Contains({3, 3, 3, 3}));
  EXPECT_TRUE(cache.Contains({4, 4, 4, 4}));
  const PrefixCacheStats st = cache.Stats();
  EXPECT_EQ(st.bytes, 300);
  EXPECT_EQ(st.snapshots, 3);
  EXPECT_EQ(st.evicted, 1);
  EXPECT_EQ(cache.Lookup({2, 2, 2, 2, 2}, 5), nullptr);

  // Larger than the whole budget: refused, nothing evicted for it.
  EXPECT_FALSE(cache.Insert(Snap({5, 5, 5, 5}, 400)));
  EXPECT_EQ(cache.Stats().snapshots, 3);
}

TEST(PrefixCacheTest, SameTokensAreHeldOnce) {
  PrefixCache cache(1000);
  ASSERT_TRUE(cache.Insert(Snap({1, 2, 3}, 10, 1)));
  ASSERT_TRUE(cache.Insert(Snap({1, 2, 3}, 10, 2)));
  EXPECT_EQ(cache.Stats().snapshots, 1);
  // The first is kept: a snapshot never changes once taken.
  EXPECT_EQ(cache.Lookup({1, 2, 3, 4}, 4)->state.get()[0], 1);
}

TEST(PrefixCacheTest, AnEvictedSnapshotStaysValidForItsHolder) {
  PrefixCache cache(100);
  ASSERT_TRUE(cache.Insert(Snap({1, 2}, 92, 9)));
  auto held = cache.Lookup({1, 2, 3}, 3);
  ASSERT_NE(held, nullptr);
  ASSERT_TRUE(cache.Insert(Snap({7, 8}, 92)));
  EXPECT_FALSE(cache.Contains({1, 2}));
  EXPECT_EQ(held->state_bytes, 92);
  EXPECT_EQ(held->state.get()[91], 9);
}

// The scheduler frees a host block for a new snapshot this way.
TEST(PrefixCacheTest, EvictLruDropsTheLeastRecentlyUsed) {
  PrefixCache cache(1000);
  ASSERT_TRUE(cache.Insert(Snap({1}, 10)));
  ASSERT_TRUE(cache.Insert(Snap({2}, 10)));
  ASSERT_NE(cache.Lookup({1, 5}, 2), nullptr);  // {1} is now the most recent
  EXPECT_TRUE(cache.EvictLru());
  EXPECT_TRUE(cache.Contains({1}));
  EXPECT_FALSE(cache.Contains({2}));
  EXPECT_EQ(cache.Stats().bytes, 14);
  EXPECT_EQ(cache.Stats().evicted, 1);
  EXPECT_TRUE(cache.EvictLru());
  EXPECT_FALSE(cache.EvictLru());
  EXPECT_EQ(cache.Stats().snapshots, 0);
}

TEST(PrefixCacheTest, BudgetZeroDisablesIt) {
  PrefixCache cache(0);
  EXPECT_FALSE(cache.enabled());
  EXPECT_FALSE(cache.Insert(Snap({1, 2, 3}, 4)));
  EXPECT_EQ(cache.Lookup({1, 2, 3, 4}, 4), nullptr);
  EXPECT_EQ(cache.Stats().snapshots, 0);
  EXPECT_EQ(cache.Stats().bytes, 0);
}

TEST(PrefixCacheTest, ManyLengthsAndCollidingBuckets) {
  // Snapshots at every length 1..200 of one sequence, plus a sibling branch:
  // each lookup must return exactly the longest matching one.
  PrefixCache cache(1 << 24);
  const std::vector<int32_t> base = Range(100, 300);
  for (size_t len = 1; len <= base.size(); ++len) {
    ASSERT_TRUE(cache.Insert(
        Snap(std::vector<int32_t>(base.begin(), base.begin() + len), 4)));
  }
  std::vector<int32_t> branch(base.begin(), base.begin() + 50);
  branch.push_back(-1);
  branch.push_back(-2);
  ASSERT_TRUE(cache.Insert(Snap(branch, 4)));
  for (size_t len : {1u, 2u, 37u, 50u, 51u, 199u, 200u}) {
    std::vector<int32_t> prompt(base.begin(), base.begin() + len);
    prompt.push_back(7);
    auto hit = cache.Lookup(prompt, prompt.size());
    ASSERT_NE(hit, nullptr) << len;
    EXPECT_EQ(hit->tokens.size(), len);
  }
  branch.push_back(5);
  auto hit = cache.Lookup(branch, branch.size());
  ASSERT_NE(hit, nullptr);
  EXPECT_EQ(hit->tokens.size(), 52u);
}

// A snapshot is found only in its own scope: equal tokens in another scope
// miss, and each scope holds its own snapshot of the same tokens.
TEST(PrefixCacheTest, PeekFindsWithoutCountingOrTouching) {
  PrefixCache cache(64);  // two snapshots of 16 state bytes and 4 tokens
  ASSERT_TRUE(cache.Insert(Snap(Range(0, 4), 16, 1)));
  ASSERT_TRUE(cache.Insert(Snap(Range(10, 14), 16, 2)));
  auto peeked = cache.Peek(Range(0, 6), 6);
  ASSERT_NE(peeked, nullptr);
  EXPECT_EQ(peeked->tokens, Range(0, 4));
  EXPECT_EQ(cache.Peek(Range(0, 6), 3), nullptr);
  EXPECT_EQ(cache.Peek(Range(0, 6), 6, "other scope"), nullptr);
  EXPECT_EQ(cache.Stats().queries, 0);
  EXPECT_EQ(cache.Stats().hits, 0);
  // Still the least recently used: the next insert evicts it.
  ASSERT_TRUE(cache.Insert(Snap(Range(20, 24), 16, 3)));
  EXPECT_FALSE(cache.Contains(Range(0, 4)));
}

TEST(PrefixCacheTest, ScopesNeverShareASnapshot) {
  PrefixCache cache(1 << 20);
  PrefixSnapshot a = Snap(Range(0, 8), 16, 1);
  a.scope = "team-a";
  ASSERT_TRUE(cache.Insert(std::move(a)));
  EXPECT_EQ(cache.Lookup(Range(0, 10), 10, "team-b"), nullptr);
  EXPECT_EQ(cache.Lookup(Range(0, 10), 10), nullptr);  // the unscoped ""
  EXPECT_FALSE(cache.Contains(Range(0, 8), "team-b"));
  auto hit = cache.Lookup(Range(0, 10), 10, "team-a");
  ASSERT_NE(hit, nullptr);
  EXPECT_EQ(hit->state.get()[0], 1);
  PrefixSnapshot b = Snap(Range(0, 8), 16, 2);
  b.scope = "team-b";
  ASSERT_TRUE(cache.Insert(std::move(b)));
  EXPECT_EQ(cache.Stats().snapshots, 2);
  EXPECT_EQ(cache.Lookup(Range(0, 10), 10, "team-b")->state.get()[0], 2);
  EXPECT_EQ(cache.Lookup(Range(0, 10), 10, "team-a")->state.get()[0], 1);
}

}  // namespace
}  // namespace seqboat
