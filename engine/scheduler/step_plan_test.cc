#include "engine/scheduler/step_plan.h"

#include "gtest/gtest.h"

namespace seqboat {
namespace {

TEST(StepPlanTest, DecodesFirstThenChunksOldestFirst) {
  // seq 0 decoding, seq 1 at 40 of a 100-token prompt, seq 2 fresh.
  const std::vector<SequenceView> seqs = {{5, 5}, {100, 40}, {30, 0}};
  StepPlan plan = PlanStep(seqs, 50);
  ASSERT_EQ(plan.runs.size(), 2u);  // the budget is spent before seq 2
  EXPECT_TRUE(plan.runs[0].decode);
  EXPECT_TRUE(plan.runs[0].wants_logits);
  EXPECT_EQ(plan.runs[0].seq, 0);
  EXPECT_EQ(plan.runs[1].seq, 1);
  EXPECT_EQ(plan.runs[1].prompt_from, 40);
  EXPECT_EQ(plan.runs[1].len, 49);
  EXPECT_FALSE(plan.runs[1].wants_logits);  // prompt not finished yet
  EXPECT_EQ(plan.rows, 50);
}

TEST(StepPlanTest, ChunkEndingThePromptWantsLogits) {
  const std::vector<SequenceView> seqs = {{10, 0}, {7, 3}};
  StepPlan plan = PlanStep(seqs, 64);
  ASSERT_EQ(plan.runs.size(), 2u);
  EXPECT_EQ(plan.runs[0].len, 10);
  EXPECT_TRUE(plan.runs[0].wants_logits);
  EXPECT_EQ(plan.runs[1].prompt_from, 3);
  EXPECT_EQ(plan.runs[1].len, 4);
  EXPECT_TRUE(plan.runs[1].wants_logits);
  EXPECT_EQ(plan.rows, 14);
}

TEST(StepPlanTest, DecodesAlwaysRunEvenPastTheBudget) {
  const std::vector<SequenceView> seqs(8, SequenceView{3, 3});
  StepPlan plan = PlanStep(seqs, 4);
  EXPECT_EQ(plan.runs.size(), 8u);
  EXPECT_EQ(plan.rows, 8);
}

TEST(StepPlanTest, AChunkStopsAtThePausePointAndTheBudgetPassesOn) {
  // The first prompt must stop at 9 (its snapshot point); the budget it did
  // not use goes to the next prompt.
  const std::vector<SequenceView> seqs = {{10, 2, 9}, {20, 0, 19}};
  StepPlan plan = PlanStep(seqs, 16);
  ASSERT_EQ(plan.runs.size(), 2u);
  EXPECT_EQ(plan.runs[0].prompt_from, 2);
  EXPECT_EQ(plan.runs[0].len, 7);
  EXPECT_FALSE(plan.runs[0].wants_logits);
  EXPECT_EQ(plan.runs[1].len, 9);
  // At the pause point the rest runs as usual.
  plan = PlanStep({{10, 9, 9}}, 16);
  ASSERT_EQ(plan.runs.size(), 1u);
  EXPECT_EQ(plan.runs[0].len, 1);
  EXPECT_TRUE(plan.runs[0].wants_logits);
  // A pause point the chunk ends on or does not reach changes nothing.
  plan = PlanStep({{30, 0, 8}}, 8);
  EXPECT_EQ(plan.runs[0].len, 8);
  plan = PlanStep({{30, 0, 20}}, 8);
  EXPECT_EQ(plan.runs[0].len, 8);
}

TEST(StepPlanTest, EmptyWhenNothingRuns) {
  StepPlan plan = PlanStep({}, 16);
  EXPECT_TRUE(plan.runs.empty());
  EXPECT_EQ(plan.rows, 0);
}

}  // namespace
}  // namespace seqboat
