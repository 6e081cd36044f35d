#include "engine/round_threshold.h"

#include <vector>

#include "gtest/gtest.h"
#include "kernels/cpu/cpu_backend.h"

namespace seqboat {
namespace {

// A device bound by reading the weights up to `flat_rows` rows a step, then
// by compute: a step of r rows takes max(1, r / flat_rows) ms.
RoundTiming Fake(int32_t batch, int32_t drafts, double flat_rows) {
  auto ms = [flat_rows](double rows) {
    return std::max(1.0, rows / flat_rows);
  };
  return {batch, ms(batch), ms(batch * (2.0 + drafts))};
}

TEST(RoundThresholdTest, ExpectedTokensSumTheRunOfMatches) {
  EXPECT_DOUBLE_EQ(ExpectedRoundTokens(0.5, 0), 1.0);
  EXPECT_DOUBLE_EQ(ExpectedRoundTokens(0.5, 3), 1.875);
  EXPECT_DOUBLE_EQ(ExpectedRoundTokens(1.0, 4), 5.0);
  EXPECT_DOUBLE_EQ(ExpectedRoundTokens(0.0, 4), 1.0);
}

TEST(RoundThresholdTest, StopsAtTheFirstBatchWhoseRoundCostsMoreThanItYields) {
  std::vector<int32_t> asked;
  // Flat to 32 rows: a round of 4 (6 rows a sequence) is free up to batch
  // 4 (24 rows); at 8 it costs 48/32 = 1.5 steps, at 16 3 steps, at 32 6.
  // At acceptance 0.5 a round of 4 yields 1.9375 tokens: 8 pays, 16 not.
  const RoundThreshold t = FindRoundThreshold(
      64, 4, 0.5, [&](int32_t b) -> absl::StatusOr<RoundTiming> {
        asked.push_back(b);
        return Fake(b, 4, 32);
      });
  EXPECT_EQ(t.max_batch, 8);
  EXPECT_EQ(asked, (std::vector<int32_t>{1, 2, 4, 8, 16}));
  ASSERT_EQ(t.timings.size(), 5u);
  EXPECT_DOUBLE_EQ(t.timings[4].round_ms, 3.0);
  EXPECT_EQ(t.Describe().rfind("speculation off above 8 running sequences: "
                               "step at batch 1 = 1.000 ms, round of 4 "
                               "drafts = 1.000 ms (1.00x);",
                               0),
            0u)
      << t.Describe();
}

TEST(RoundThresholdTest, EveryBatchPaysUpToTheCeiling) {
  const RoundThreshold t = FindRoundThreshold(
      16, 2, 0.8, [](int32_t b) -> absl::StatusOr<RoundTiming> {
        return Fake(b, 2, 1000);
      });
  EXPECT_EQ(t.max_batch, 16);
  EXPECT_EQ(t.timings.size(), 5u);  // 1, 2, 4, 8, 16
}

TEST(RoundThresholdTest, ARoundThatNeverPaysTurnsSpeculationOff) {
  // Bound by compute from the first row: a round of 4 costs 6 steps.
  const RoundThreshold t = FindRoundThreshold(
      16, 4, 0.8, [](int32_t b) -> absl::StatusOr<RoundTiming> {
        return RoundTiming{b, 1.0 * b, 6.0 * b};
      });
  EXPECT_EQ(t.max_batch, 0);
  EXPECT_EQ(t.timings.size(), 1u);
}

TEST(RoundThresholdTest, ABatchThatCannotBeTimedEndsTheSearch) {
  const RoundThreshold t = FindRoundThreshold(
      64, 4, 0.8, [](int32_t b) -> absl::StatusOr<RoundTiming> {
        if (b > 2) return absl::FailedPreconditionError("no slots");
        return Fake(b, 4, 1000);
      });
  EXPECT_EQ(t.max_batch, 2);
  EXPECT_EQ(t.timings.size(), 2u);
  EXPECT_EQ(t.cut_short, "no slots");
  EXPECT_NE(t.Describe().find("not timed further: no slots"), std::string::npos)
      << t.Describe();
}

TEST(RoundThresholdTest, NoDraftsMeasuresNothing) {
  int calls = 0;
  const RoundThreshold t = FindRoundThreshold(
      16, 0, 0.8, [&](int32_t b) -> absl::StatusOr<RoundTiming> {
        ++calls;
        return Fake(b, 0, 1000);
      });
  EXPECT_EQ(t.max_batch, 0);
  EXPECT_EQ(calls, 0);
}

TEST(RoundThresholdTest, TimesTheModelOnScratchSlotsAndGivesThemBack) {
  auto backend = MakeCpuBackend(1);
  ModelLimits limits;
  limits.max_slots = 8;
  limits.max_rows_per_step = 64;
  limits.max_logit_rows = 40;
  auto model = Model::Load("tests/data/tiny_hybrid", *backend, limits);
  ASSERT_TRUE(model.ok()) << model.status();
  absl::StatusOr<RoundTiming> t = TimeRounds(**model, 4, 4, 2);
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_EQ(t->batch, 4);
  EXPECT_GT(t->step_ms, 0);
  EXPECT_GT(t->round_ms, 0);
  EXPECT_EQ((*model)->arena().free_slots(), 8);
  // Five sequences would need ten slots.
  absl::StatusOr<RoundTiming> too_many = TimeRounds(**model, 5, 4, 2);
  EXPECT_EQ(too_many.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ((*model)->arena().free_slots(), 8);

  EngineOptions options;
  options.max_draft_tokens = 4;
  const RoundThreshold measured = MeasureRoundThreshold(options, **model);
  EXPECT_EQ(measured.drafts, 4);
  EXPECT_GE(measured.timings.size(), 1u);
  EXPECT_LE(measured.max_batch, 4);  // half the slots
  EXPECT_EQ((*model)->arena().free_slots(), 8);
}

}  // namespace
}  // namespace seqboat
