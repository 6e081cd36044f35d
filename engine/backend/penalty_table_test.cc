// PenaltyTables and Sampler::DescribeNext(tables): the table a backend
// builds from the writes holds exactly the lists DescribeNext(&ids) writes
// whole, the writes per draw do not grow with the history (only when a list
// moves to a larger room is it written again, a few times in a long life),
// rows without penalties write and hold nothing, and freed rooms are reused.
#include "engine/backend/penalty_table.h"

#include <algorithm>
#include <cstdint>
#include <memory>
#include <random>
#include <vector>

#include "engine/backend/sample_row.h"
#include "engine/backend/sampler.h"
#include "engine/backend/sampling_params.h"
#include "gtest/gtest.h"

namespace seqboat {
namespace {

// Applies the launch's writes to `table` as a host backend does.
void Apply(const PenaltyTables& tables, const SampleRow& row,
           std::vector<int32_t>* table) {
  SampleRowsParams p;
  p.m = 1;
  p.rows = &row;
  p.table = tables.update();
  ASSERT_TRUE(ApplyPenaltyTableUpdate(p, table).ok());
}

// The row's lists in the table against the flat ones.
void ExpectSameLists(const SampleRow& a, const std::vector<int32_t>& table,
                     const SampleRow& b, const std::vector<int32_t>& flat) {
  ASSERT_EQ(a.seen_count, b.seen_count);
  ASSERT_EQ(a.counted_count, b.counted_count);
  ASSERT_EQ(a.suppressed_count, b.suppressed_count);
  const auto same = [&](int32_t at, int32_t bt, int32_t n) {
    return std::equal(table.begin() + at, table.begin() + at + n,
                      flat.begin() + bt);
  };
  EXPECT_TRUE(same(a.seen_offset, b.seen_offset, a.seen_count));
  EXPECT_TRUE(same(a.counted_offset, b.counted_offset, 2 * a.counted_count));
  EXPECT_TRUE(
      same(a.suppressed_offset, b.suppressed_offset, a.suppressed_count));
}

TEST(PenaltyTableTest, WritesPerDrawDoNotGrowWithTheHistory) {
  SamplingParams params;
  params.repetition_penalty = 1.2f;
  params.frequency_penalty = 0.5f;
  params.presence_penalty = 0.1f;
  constexpr int32_t kVocab = 50000;
  PenaltyTables tables;  // outlives the sampler, which holds rooms in it
  Sampler sampler(params, kVocab, false, 0);
  std::mt19937 rng(3);
  constexpr int kPrompt = 3000;
  for (int i = 0; i < kPrompt; ++i) sampler.Observe(rng() % kVocab);
  sampler.Suppress({1, 2, 3});
  std::vector<int32_t> table;
  int big_steps = 0;
  int32_t most = 0;
  constexpr int kSteps = 4000;
  for (int step = 0; step < kSteps; ++step) {
    tables.BeginLaunch();
    const SampleRow row = sampler.DescribeNext(&tables);
    Apply(tables, row, &table);
    std::vector<int32_t> flat;
    const SampleRow full = sampler.DescribeNext(&flat);
    ExpectSameLists(row, table, full, flat);
    if (step == 0) {
      EXPECT_GE(tables.writes(), full.seen_count + full.suppressed_count);
    } else if (tables.writes() > 3) {
      ++big_steps;  // a list moved to a larger room
      most = std::max(most, tables.writes());
    }
    // A new id: seen and counted (3 writes); a repeat: its count (1).
    const int32_t token =
        rng() % 4 == 0 ? static_cast<int32_t>(rng() % kVocab) : rng() % 64;
    sampler.ObserveGenerated(token);
    sampler.CountDraw();
    if (step == 10) sampler.Suppress({});
  }
  // Rooms double: a handful of moves over the whole life, each no larger
  // than its list.
  EXPECT_LE(big_steps, 8);
  EXPECT_GT(big_steps, 0);
  EXPECT_LE(most, 2 * (kPrompt + kSteps) + 2 * 64);
  // The table holds about twice the live lists at most.
  std::vector<int32_t> flat;
  const SampleRow full = sampler.DescribeNext(&flat);
  EXPECT_LE(tables.held(), 2 * static_cast<int64_t>(flat.size()) + 64);
}

TEST(PenaltyTableTest, RowsWithoutPenaltiesWriteAndHoldNothing) {
  SamplingParams params;
  params.temperature = 0.7f;
  PenaltyTables tables;
  Sampler sampler(params, 1000, false, 0);
  for (int i = 0; i < 500; ++i) sampler.Observe(i);
  for (int step = 0; step < 50; ++step) {
    tables.BeginLaunch();
    const SampleRow row = sampler.DescribeNext(&tables);
    EXPECT_EQ(row.seen_count + row.counted_count + row.suppressed_count, 0);
    EXPECT_EQ(tables.writes(), 0);
    sampler.ObserveGenerated(step);
    sampler.CountDraw();
  }
  EXPECT_EQ(tables.held(), 0);
  EXPECT_EQ(tables.size(), 0);
  // A min_new_tokens mask alone: written once, lifted without a write.
  sampler.Suppress({7, 9});
  tables.BeginLaunch();
  EXPECT_EQ(sampler.DescribeNext(&tables).suppressed_count, 2);
  EXPECT_EQ(tables.writes(), 2);
  tables.BeginLaunch();
  sampler.DescribeNext(&tables);
  EXPECT_EQ(tables.writes(), 0);
  sampler.Suppress({});
  tables.BeginLaunch();
  EXPECT_EQ(sampler.DescribeNext(&tables).suppressed_count, 0);
  EXPECT_EQ(tables.writes(), 0);
}

TEST(PenaltyTableTest, FreedRoomsAreReusedAndCopiesStartOver) {
  SamplingParams params;
  params.repetition_penalty = 1.1f;
  params.frequency_penalty = 0.2f;
  PenaltyTables tables;
  std::vector<int32_t> table;
  std::mt19937 rng(5);
  std::vector<std::unique_ptr<Sampler>> live(8);
  int64_t peak_held = 0;
  for (int round = 0; round < 2000; ++round) {
    auto& slot = live[rng() % live.size()];
    if (slot == nullptr || rng() % 4 == 0) {
      // A cancel and the slot's reuse, or a fork of another slot.
      const auto& other = live[rng() % live.size()];
      slot = other != nullptr && rng() % 3 == 0
                 ? std::make_unique<Sampler>(*other)
                 : std::make_unique<Sampler>(params, 4000, false, 0);
      for (int i = static_cast<int>(rng() % 400); i > 0; --i)
        slot->Observe(rng() % 4000);
    }
    slot->ObserveGenerated(rng() % 100);
    tables.BeginLaunch();
    const SampleRow row = slot->DescribeNext(&tables);
    Apply(tables, row, &table);
    std::vector<int32_t> flat;
    ExpectSameLists(row, table, slot->DescribeNext(&flat), flat);
    peak_held = std::max(peak_held, tables.held());
  }
  EXPECT_LE(tables.size(), 4 * peak_held);
  live.clear();
  EXPECT_EQ(tables.held(), 0);
}

}  // namespace
}  // namespace seqboat
