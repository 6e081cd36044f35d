#include "engine/state/arena_budget.h"

#include <limits>

#include "gtest/gtest.h"

namespace seqboat {
namespace {

constexpr int64_t kMiB = int64_t{1} << 20;

TEST(ArenaBudgetTest, CountsWholeSlotsAfterTheReserve) {
  EXPECT_EQ(SlotsThatFit(10 * kMiB, 1000 * kMiB, 256 * kMiB), 74);
  EXPECT_EQ(SlotsThatFit(10 * kMiB, 200 * kMiB, 256 * kMiB), 0);
  EXPECT_EQ(SlotsThatFit(0, 0, 256 * kMiB),
            std::numeric_limits<int64_t>::max());
}

TEST(ArenaBudgetTest, FittingArenaIsOk) {
  EXPECT_TRUE(
      CheckArenaFits(10 * kMiB, 74, 1000 * kMiB, 256 * kMiB, "gpu").ok());
  EXPECT_TRUE(CheckArenaFits(0, 100000, 0, 256 * kMiB, "gpu").ok());
}

TEST(ArenaBudgetTest, TooManySlotsNamesWhatFits) {
  const absl::Status s =
      CheckArenaFits(int64_t{18} * kMiB + 200 * 1024, 256,
                     3 * (int64_t{1} << 30), 256 * kMiB, "CUDA device 0");
  ASSERT_EQ(s.code(), absl::StatusCode::kResourceExhausted);
  EXPECT_NE(s.message().find("256 slots x 18.2 MiB = 4.55 GiB"),
            std::string::npos)
      << s;
  EXPECT_NE(s.message().find("CUDA device 0 has 3.00 GiB free"),
            std::string::npos)
      << s;
  EXPECT_NE(s.message().find("--max_slots=154 fits"), std::string::npos) << s;
}

TEST(ArenaBudgetTest, NothingFits) {
  const absl::Status s =
      CheckArenaFits(kMiB, 1, 100 * kMiB, 256 * kMiB, "CUDA device 1");
  EXPECT_NE(s.message().find("not even one slot fits"), std::string::npos) << s;
}

}  // namespace
}  // namespace seqboat
