#include "engine/backend/decode_buckets.h"

#include <vector>

#include "gtest/gtest.h"

namespace seqboat {
namespace {

TEST(DecodeBucketsTest, DefaultListIsAscendingAndEndsAtMaxSlots) {
  EXPECT_EQ(DefaultDecodeBuckets(1), std::vector<int>({1}));
  EXPECT_EQ(DefaultDecodeBuckets(6), std::vector<int>({1, 2, 4, 6}));
  EXPECT_EQ(DefaultDecodeBuckets(8), std::vector<int>({1, 2, 4, 8}));
  EXPECT_EQ(DefaultDecodeBuckets(40),
            std::vector<int>({1, 2, 4, 8, 16, 24, 32, 40}));
  const std::vector<int> big = DefaultDecodeBuckets(256);
  EXPECT_EQ(big, std::vector<int>({1, 2, 4, 8, 16, 24, 32, 40, 48, 56, 64, 96,
                                   128, 160, 192, 224, 256}));
  EXPECT_TRUE(DefaultDecodeBuckets(0).empty());
}

TEST(DecodeBucketsTest, PadsToTheSmallestBucketThatHoldsTheStep) {
  const std::vector<int> b = DefaultDecodeBuckets(256);
  EXPECT_EQ(PickDecodeBucket(b, 1), 1);
  EXPECT_EQ(PickDecodeBucket(b, 3), 4);
  EXPECT_EQ(PickDecodeBucket(b, 9), 16);
  EXPECT_EQ(PickDecodeBucket(b, 65), 96);
  EXPECT_EQ(PickDecodeBucket(b, 256), 256);
  EXPECT_EQ(PickDecodeBucket(b, 257), 0);
  EXPECT_EQ(PickDecodeBucket({}, 1), 0);
}

TEST(DecodeBucketsTest, PadsAtMostSevenRowsUpTo64And31Beyond) {
  const std::vector<int> b = DefaultDecodeBuckets(256);
  for (int n = 1; n <= 256; ++n) {
    const int bucket = PickDecodeBucket(b, n);
    ASSERT_GE(bucket, n);
    EXPECT_LE(bucket - n, n <= 64 ? 7 : 31) << n;
  }
}

}  // namespace
}  // namespace seqboat
