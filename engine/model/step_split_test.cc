#include "engine/model/step_split.h"

#include <vector>

#include "gtest/gtest.h"

namespace seqboat {
namespace {

const std::vector<int> kBuckets = {1, 2, 4, 8};

// Rows: a prefill chunk of 3 on slot 5, a decode row on slot 1 (fed from
// the previous step's logit row 4), a chunk of 2 on slot 2, a decode row on
// slot 3.
StepRows Mixed() {
  StepRows rows;
  rows.ids = {10, 11, 12, 0, 20, 21, 30};
  rows.segs = {{5, 0, 3}, {1, 3, 1}, {2, 4, 2}, {3, 6, 1}};
  rows.logit_rows = {2, 3, 5, 6};
  rows.fed_rows = {3};
  rows.fed_from = {4};
  return rows;
}

TEST(StepSplitTest, OneRowSegmentsGoFirstPaddedAndTheRestAfterTheBucket) {
  StepSplit split;
  ASSERT_TRUE(PlanStepSplit(Mixed(), kBuckets, 1, split));
  EXPECT_EQ(split.bucket, 2);
  EXPECT_EQ(split.decode.ids, (std::vector<int32_t>{0, 30}));
  ASSERT_EQ(split.decode.nsegs(), 2);
  EXPECT_EQ(split.decode.segs[0].slot, 1);
  EXPECT_EQ(split.decode.segs[1].slot, 3);
  EXPECT_EQ(split.decode.segs[1].start, 1);
  EXPECT_EQ(split.decode.fed_rows, (std::vector<int32_t>{0}));
  EXPECT_EQ(split.decode.fed_from, (std::vector<int32_t>{4}));
  EXPECT_EQ(split.decode.m(), 0);
  EXPECT_EQ(split.rest.ids, (std::vector<int32_t>{10, 11, 12, 20, 21}));
  ASSERT_EQ(split.rest.nsegs(), 2);
  EXPECT_EQ(split.rest.segs[1].slot, 2);
  EXPECT_EQ(split.rest.segs[1].start, 3);
  EXPECT_EQ(split.rest.segs[1].len, 2);
  EXPECT_TRUE(split.rest.fed_rows.empty());
  // Step row r sits at order[r] of the passes' buffer: the decode rows at
  // [0, 2), the rest from 2 on.
  EXPECT_EQ(split.order, (std::vector<int32_t>{2, 3, 4, 0, 5, 6, 1}));
}

TEST(StepSplitTest, PaddingIsZeroLengthSegmentsOnSlotZero) {
  StepRows rows = Mixed();
  rows.ids.push_back(40);
  rows.segs.push_back({4, 7, 1});
  StepSplit split;
  ASSERT_TRUE(PlanStepSplit(rows, kBuckets, 1, split));
  EXPECT_EQ(split.bucket, 4);
  ASSERT_EQ(split.decode.n(), 4);
  ASSERT_EQ(split.decode.nsegs(), 4);
  EXPECT_EQ(split.decode.segs[3].slot, 0);
  EXPECT_EQ(split.decode.segs[3].start, 3);
  EXPECT_EQ(split.decode.segs[3].len, 0);
}

TEST(StepSplitTest, FedRowsOfTheRestAreRenumberedThere) {
  StepRows rows = Mixed();
  rows.fed_rows = {4, 6};
  rows.fed_from = {1, 0};
  StepSplit split;
  ASSERT_TRUE(PlanStepSplit(rows, kBuckets, 1, split));
  EXPECT_EQ(split.rest.fed_rows, (std::vector<int32_t>{3}));
  EXPECT_EQ(split.rest.fed_from, (std::vector<int32_t>{1}));
  EXPECT_EQ(split.decode.fed_rows, (std::vector<int32_t>{1}));
  EXPECT_EQ(split.decode.fed_from, (std::vector<int32_t>{0}));
}

TEST(StepSplitTest, StepsThatShouldStayInOnePassAreRefused) {
  StepSplit split;
  // Fewer one-row segments than asked for.
  EXPECT_FALSE(PlanStepSplit(Mixed(), kBuckets, 3, split));
  EXPECT_TRUE(PlanStepSplit(Mixed(), kBuckets, 2, split));
  // No buckets, or none large enough.
  EXPECT_FALSE(PlanStepSplit(Mixed(), {}, 1, split));
  EXPECT_FALSE(PlanStepSplit(Mixed(), {1}, 1, split));
  // No one-row segment at all.
  StepRows prefill{{1, 2, 3}, {{0, 0, 3}}, {2}};
  EXPECT_FALSE(PlanStepSplit(prefill, kBuckets, 1, split));
  // A slot with a one-row segment and a longer one: the passes would
  // reorder its updates.
  StepRows twice = Mixed();
  twice.segs[2].slot = 1;
  EXPECT_FALSE(PlanStepSplit(twice, kBuckets, 1, split));
  // Segments that leave rows out or overlap.
  StepRows gap = Mixed();
  gap.segs[3].start = 5;
  EXPECT_FALSE(PlanStepSplit(gap, kBuckets, 1, split));
}

}  // namespace
}  // namespace seqboat
