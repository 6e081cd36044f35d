#include "engine/scheduler/draft_length.h"

#include "gtest/gtest.h"

namespace seqboat {
namespace {

TEST(DraftLengthTest, StartsAtTheRequestsCountAndStaysThereWhenFixed) {
  DraftLength fixed(4, /*adaptive=*/false);
  EXPECT_EQ(fixed.next(), 4);
  fixed.Update(4, 0);
  fixed.Update(4, 1);
  EXPECT_EQ(fixed.next(), 4);
}

TEST(DraftLengthTest, ShrinksAfterRejectionsToAFloorOfOne) {
  DraftLength len(6, true);
  len.Update(6, 4);  // one past the four taken, one fewer than offered
  EXPECT_EQ(len.next(), 5);
  len.Update(5, 1);  // one past the one taken
  EXPECT_EQ(len.next(), 2);
  len.Update(2, 0);
  EXPECT_EQ(len.next(), 1);
  len.Update(1, 0);  // never below one
  EXPECT_EQ(len.next(), 1);
}

TEST(DraftLengthTest, GrowsByOneAfterEachWholeDraftUpToTheMost) {
  DraftLength len(4, true);
  len.Update(4, 0);
  ASSERT_EQ(len.next(), 1);
  len.Update(1, 1);
  EXPECT_EQ(len.next(), 2);
  len.Update(2, 2);
  EXPECT_EQ(len.next(), 3);
  len.Update(3, 3);
  len.Update(4, 4);
  len.Update(4, 4);
  EXPECT_EQ(len.next(), 4);
}

TEST(DraftLengthTest, AShortDraftTakenWholeDoesNotGrowIt) {
  DraftLength len(6, true);
  len.Update(6, 2);
  ASSERT_EQ(len.next(), 3);
  len.Update(2, 2);  // the drafter had only two
  EXPECT_EQ(len.next(), 3);
  len.Update(0, 0);  // no round
  EXPECT_EQ(len.next(), 3);
}

}  // namespace
}  // namespace seqboat
