#include "kernels/cuda/descriptor_staging.h"

#include <cstring>
#include <vector>

#include "absl/status/status.h"
#include "gtest/gtest.h"

namespace seqboat::cuda {
namespace {

class DescriptorStagingTest : public ::testing::Test {
 protected:
  explicit DescriptorStagingTest(size_t capacity = 256)
      : buffer_(capacity, 0xEE), staging_(buffer_.data(), capacity) {}

  DescriptorStaging::Placement PlaceOk(const std::vector<int32_t>& v) {
    auto p = staging_.Place(v.data(), v.size() * sizeof(int32_t));
    EXPECT_TRUE(p.ok()) << p.status();
    return p.ok() ? *p : DescriptorStaging::Placement{};
  }
  std::vector<int32_t> Read(size_t offset, size_t count) const {
    std::vector<int32_t> out(count);
    std::memcpy(out.data(), buffer_.data() + offset, count * sizeof(int32_t));
    return out;
  }

  std::vector<uint8_t> buffer_;
  DescriptorStaging staging_;
};

TEST_F(DescriptorStagingTest, CopiesContentsAtAlignedOffsets) {
  const std::vector<int32_t> a = {1, 2, 3};  // 12 bytes
  const std::vector<int32_t> b = {4, 5, 6, 7, 8};
  const auto pa = PlaceOk(a);
  const auto pb = PlaceOk(b);
  EXPECT_TRUE(pa.fresh);
  EXPECT_TRUE(pb.fresh);
  EXPECT_EQ(pa.offset, 0u);
  EXPECT_EQ(pb.offset, 16u);
  EXPECT_EQ(Read(pa.offset, 3), a);
  EXPECT_EQ(Read(pb.offset, 5), b);
  EXPECT_EQ(staging_.used(), 48u);
}

TEST_F(DescriptorStagingTest, EqualContentsArePlacedOnceFromAnyAddress) {
  const std::vector<int32_t> a = {9, 8, 7, 6};
  const std::vector<int32_t> copy = a;  // same bytes, other address
  const std::vector<int32_t> prefix = {9, 8};
  const auto first = PlaceOk(a);
  const auto again = PlaceOk(copy);
  EXPECT_FALSE(again.fresh);
  EXPECT_EQ(again.offset, first.offset);
  // Same leading bytes but another length is another array.
  const auto shorter = PlaceOk(prefix);
  EXPECT_TRUE(shorter.fresh);
  EXPECT_NE(shorter.offset, first.offset);
  EXPECT_EQ(staging_.used(), 32u);
}

TEST_F(DescriptorStagingTest, LogRecordsEveryPlacementInOrder) {
  PlaceOk({1});
  PlaceOk({2, 2});
  PlaceOk({1});
  const DescriptorStaging::Log want = {{0, 4}, {16, 8}, {0, 4}};
  EXPECT_EQ(staging_.log(), want);
}

TEST_F(DescriptorStagingTest, SameStepStagesTheSameLogAfterRewind) {
  // What RunCaptured relies on: a replayed step that stages the same
  // descriptors reproduces the recording's log; different ones do not.
  auto step = [&](int32_t token) {
    staging_.Rewind();
    PlaceOk({0, 1, 2});       // segments
    PlaceOk({token, token});  // ids
    PlaceOk({0, 1, 2});       // segments again, for the next op
    return staging_.log();
  };
  const DescriptorStaging::Log recorded = step(5);
  EXPECT_EQ(step(6), recorded);  // values differ, placement does not
  // A step whose ids equal its segments dedupes differently: the log says
  // so, and the backend must not replay the recording for it.
  staging_.Rewind();
  PlaceOk({0, 1, 2});
  PlaceOk({0, 1, 2});
  PlaceOk({0, 1, 2});
  EXPECT_NE(staging_.log(), recorded);
}

TEST_F(DescriptorStagingTest, FullPassIsUnavailableUntilRewound) {
  std::vector<int32_t> big(48, 1);  // 192 bytes of 256
  PlaceOk(big);
  std::vector<int32_t> more(20, 2);  // 80 bytes: does not fit what is left
  auto p = staging_.Place(more.data(), more.size() * sizeof(int32_t));
  ASSERT_FALSE(p.ok());
  EXPECT_TRUE(absl::IsUnavailable(p.status())) << p.status();
  // A repeat needs no room.
  auto repeat = staging_.Place(big.data(), big.size() * sizeof(int32_t));
  ASSERT_TRUE(repeat.ok()) << repeat.status();
  EXPECT_FALSE(repeat->fresh);
  staging_.Rewind();
  EXPECT_TRUE(staging_.log().empty());
  const auto after = PlaceOk(more);
  EXPECT_TRUE(after.fresh);
  EXPECT_EQ(after.offset, 0u);
  EXPECT_EQ(Read(0, 20), more);
}

TEST_F(DescriptorStagingTest, ArrayLargerThanTheBufferIsRefused) {
  std::vector<int32_t> huge(65, 3);  // 260 bytes > 256
  auto p = staging_.Place(huge.data(), huge.size() * sizeof(int32_t));
  ASSERT_FALSE(p.ok());
  EXPECT_TRUE(absl::IsResourceExhausted(p.status())) << p.status();
  EXPECT_NE(p.status().message().find("260 bytes"), std::string::npos);
  // Exactly the capacity fits.
  std::vector<int32_t> whole(64, 4);
  EXPECT_TRUE(PlaceOk(whole).fresh);
}

TEST_F(DescriptorStagingTest, RewindForgetsEarlierContents) {
  const std::vector<int32_t> a = {1, 2, 3};
  PlaceOk(a);
  staging_.Rewind();
  // The buffer may now be overwritten by the next pass: nothing may match it.
  const auto again = PlaceOk(a);
  EXPECT_TRUE(again.fresh);
  EXPECT_EQ(staging_.used(), 16u);
}

}  // namespace
}  // namespace seqboat::cuda
