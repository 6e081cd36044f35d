// The CPU backend's penalty table (SampleRowsParams::table): long penalised
// generations drawn from its table, which takes only each step's writes,
// match the draws from full flat lists at every step (greedy and seeded,
// rows run ahead of their pending token, forks, restarts after a cancel),
// and a bad update is refused by name.
#include <cstdint>
#include <memory>
#include <vector>

#include "engine/backend/backend.h"
#include "engine/backend/testing/penalty_generation.h"
#include "gtest/gtest.h"
#include "kernels/cpu/cpu_backend.h"

namespace seqboat {
namespace {

TEST(CpuPenaltyTableTest, IncrementalTableDrawsAsTheFullLists) {
  std::unique_ptr<Backend> reference = MakeCpuBackend(1);
  std::unique_ptr<Backend> cpu = MakeCpuBackend(1);
  for (uint32_t seed : {1u, 2u}) {
    penalty_generation::Options o;
    o.seed = seed;
    o.steps = 600;
    const penalty_generation::Tally t =
        penalty_generation::Run(*reference, *cpu, o);
    EXPECT_EQ(t.mismatched, 0);
    EXPECT_EQ(t.compared, o.steps * o.slots);
    EXPECT_GT(t.ahead_rows, o.steps);
    EXPECT_GT(t.restarts, 5);
    EXPECT_GT(t.forks, 0);
    // The flat lists carry every id again at every step; the table takes
    // each about once.
    EXPECT_LT(t.table_writes * 10, t.flat_ids);
    EXPECT_LT(t.table_writes, 4 * t.tokens);
  }
}

TEST(CpuPenaltyTableTest, BadUpdatesAreRefused) {
  std::unique_ptr<Backend> cpu = MakeCpuBackend(1);
  std::vector<float> logits(8, 0.0f);
  absl::StatusOr<DeviceBuffer> dev = cpu->Alloc(logits.size() * sizeof(float));
  ASSERT_TRUE(dev.ok());
  cpu->CopyToDevice(dev->get(), logits.data(), logits.size() * sizeof(float));
  SampleRow row;
  row.valid_vocab = 8;
  row.repetition_penalty = 1.5f;
  row.seen_offset = 2;
  row.seen_count = 4;
  int32_t token = -1;
  const int32_t writes[] = {0, 3, 9, 1};  // the second lies past the table
  SampleRowsParams p;
  p.logits = static_cast<const float*>(dev->get());
  p.m = 1;
  p.vocab = 8;
  p.rows = &row;
  p.tokens = &token;
  p.table = {8, writes, 2};
  absl::Status s = cpu->SampleRows(p);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("outside the table"), std::string::npos) << s;
  p.table = {4, writes, 1};  // the row reaches past the table
  s = cpu->SampleRows(p);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("outside the penalty table"), std::string::npos)
      << s;
  p.table = {8, writes, 1};
  EXPECT_TRUE(cpu->SampleRows(p).ok());
  EXPECT_EQ(token, 0);
}

}  // namespace
}  // namespace seqboat
