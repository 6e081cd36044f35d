#include "base/status_macros.h"

#include <memory>
#include <string>

#include "gtest/gtest.h"

namespace seqboat {
namespace {

absl::Status FailIf(bool fail, int* calls) {
  ++*calls;
  return fail ? absl::InvalidArgumentError("bad") : absl::OkStatus();
}

absl::Status Chain(bool fail_first, int* calls) {
  RETURN_IF_ERROR(FailIf(fail_first, calls));
  RETURN_IF_ERROR(FailIf(false, calls));
  return absl::OkStatus();
}

TEST(StatusMacrosTest, ReturnIfErrorStopsAtTheFirstFailure) {
  int calls = 0;
  absl::Status s = Chain(/*fail_first=*/true, &calls);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(s.message(), "bad");
  EXPECT_EQ(calls, 1);
  calls = 0;
  EXPECT_TRUE(Chain(false, &calls).ok());
  EXPECT_EQ(calls, 2);
}

absl::StatusOr<std::unique_ptr<int>> MakeInt(int v) {
  if (v < 0) return absl::OutOfRangeError("negative");
  return std::make_unique<int>(v);
}

absl::StatusOr<int> Sum(int a, int b) {
  ASSIGN_OR_RETURN(std::unique_ptr<int> x, MakeInt(a));  // move-only value
  int y = 0;
  ASSIGN_OR_RETURN(auto p, MakeInt(b));
  y = *p;
  RETURN_IF_ERROR(absl::OkStatus());  // into a StatusOr function
  return *x + y;
}

TEST(StatusMacrosTest, AssignOrReturnMovesTheValueOrReturnsTheError) {
  absl::StatusOr<int> ok = Sum(2, 3);
  ASSERT_TRUE(ok.ok()) << ok.status();
  EXPECT_EQ(*ok, 5);
  absl::StatusOr<int> bad = Sum(2, -1);
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kOutOfRange);
  EXPECT_EQ(bad.status().message(), "negative");
}

}  // namespace
}  // namespace seqboat
