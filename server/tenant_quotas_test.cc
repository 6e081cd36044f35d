// Per-tenant bounds: sequences in flight come back with final events, the
// request bucket refills at its rate, and one tenant over its bounds leaves
// another's untouched; the token bucket takes the prompt at admission and
// the output as delivered, and refills at its rate.
#include "server/tenant_quotas.h"

#include <vector>

#include "gtest/gtest.h"

namespace seqboat {
namespace {

Request Of(const std::string& tenant, int32_t n, std::vector<int>* finals) {
  Request r;
  r.tenant = tenant;
  r.n = n;
  r.sink = [finals](GenerationEvent e) {
    if (e.finish != FinishReason::kNone) finals->push_back(e.index);
  };
  return r;
}

GenerationEvent Final(int32_t index) {
  GenerationEvent e;
  e.index = index;
  e.finish = FinishReason::kLength;
  return e;
}

TEST(TenantQuotasTest, SequencesInFlightComeBackWithTheirFinalEvents) {
  TenantQuotas q({/*max_sequences=*/3});
  std::vector<int> finals;
  absl::Duration wait;
  const absl::Time now = absl::Now();
  Request two = Of("a", 2, &finals);
  ASSERT_TRUE(q.Admit(two, now, &wait).ok());
  Request one = Of("a", 1, &finals);
  ASSERT_TRUE(q.Admit(one, now, &wait).ok());
  Request more = Of("a", 1, &finals);
  const absl::Status over = q.Admit(more, now, &wait);
  EXPECT_EQ(over.code(), absl::StatusCode::kResourceExhausted);
  EXPECT_NE(over.message().find("limit is 3"), std::string::npos) << over;
  EXPECT_GT(wait, absl::ZeroDuration());
  Request other = Of("b", 3, &finals);
  EXPECT_TRUE(q.Admit(other, now, &wait).ok());  // b is not a's
  GenerationEvent token;  // not final: nothing comes back
  two.sink(token);
  EXPECT_EQ(q.in_flight("a"), 3);
  two.sink(Final(0));
  EXPECT_EQ(q.in_flight("a"), 2);
  EXPECT_EQ(finals, std::vector<int>{0});  // the inner sink saw it
  EXPECT_TRUE(q.Admit(more, now, &wait).ok());
  q.Refused("a", 1);  // the engine refused it
  EXPECT_EQ(q.in_flight("a"), 2);
}

TEST(TenantQuotasTest, RequestBucketRefillsAtItsRate) {
  TenantQuotas q({0, /*requests_per_second=*/2, /*request_burst=*/2});
  std::vector<int> finals;
  absl::Duration wait;
  const absl::Time t0 = absl::FromUnixSeconds(1000);
  for (int i = 0; i < 2; ++i) {
    Request r = Of("a", 1, &finals);
    ASSERT_TRUE(q.Admit(r, t0, &wait).ok()) << i;
  }
  Request r = Of("a", 1, &finals);
  EXPECT_EQ(q.Admit(r, t0, &wait).code(), absl::StatusCode::kResourceExhausted);
  EXPECT_EQ(wait, absl::Milliseconds(500));
  Request b = Of("b", 1, &finals);
  EXPECT_TRUE(q.Admit(b, t0, &wait).ok());
  EXPECT_FALSE(q.Admit(r, t0 + absl::Milliseconds(400), &wait).ok());
  EXPECT_TRUE(q.Admit(r, t0 + absl::Milliseconds(500), &wait).ok());
}

GenerationEvent Tokens(int32_t count, bool final_event) {
  GenerationEvent e;
  e.token_ids.assign(count, 7);
  if (final_event) e.finish = FinishReason::kLength;
  return e;
}

TEST(TenantQuotasTest, TokenBucketTakesPromptAndOutputAndRefills) {
  TenantLimits limits;
  limits.tokens_per_second = 10;
  limits.token_burst = 20;
  TenantQuotas q(limits);
  std::vector<int> finals;
  absl::Duration wait;
  const absl::Time t0 = absl::FromUnixSeconds(1000);
  EXPECT_EQ(q.token_level("a", t0), 20);
  Request r = Of("a", 1, &finals);
  r.prompt.assign(12, 5);
  ASSERT_TRUE(q.Admit(r, t0, &wait).ok());
  EXPECT_EQ(q.token_level("a", t0), 8);  // the prompt, at admission
  r.sink(Tokens(5, false));
  r.sink(Tokens(10, true));  // the output as delivered, into debt
  EXPECT_EQ(q.token_level("a", t0), -7);
  EXPECT_EQ(finals, std::vector<int>{0});
  EXPECT_EQ(q.in_flight("a"), 0);

  // In debt: refused with the time until one token is back.
  Request next = Of("a", 1, &finals);
  next.prompt.assign(3, 5);
  const absl::Status over = q.Admit(next, t0, &wait);
  EXPECT_EQ(over.code(), absl::StatusCode::kResourceExhausted);
  EXPECT_NE(over.message().find("10 tokens per second"), std::string::npos)
      << over;
  EXPECT_EQ(wait, absl::Milliseconds(800));
  EXPECT_EQ(q.in_flight("a"), 0);  // a refusal takes nothing
  // Another tenant's bucket is its own.
  Request b = Of("b", 1, &finals);
  b.prompt.assign(20, 5);
  EXPECT_TRUE(q.Admit(b, t0, &wait).ok());
  EXPECT_FALSE(q.Admit(next, t0 + absl::Milliseconds(700), &wait).ok());
  EXPECT_TRUE(q.Admit(next, t0 + absl::Milliseconds(800), &wait).ok());
  // Refills stop at the burst.
  EXPECT_EQ(q.token_level("a", t0 + absl::Seconds(60)), 20);
}

TEST(TenantQuotasTest, BothBucketsAreCheckedBeforeEitherIsTaken) {
  TenantLimits limits;
  limits.requests_per_second = 1;
  limits.request_burst = 1;
  limits.tokens_per_second = 1;
  limits.token_burst = 1;
  TenantQuotas q(limits);
  std::vector<int> finals;
  absl::Duration wait;
  const absl::Time t0 = absl::FromUnixSeconds(1000);
  Request r = Of("a", 1, &finals);
  r.prompt.assign(3, 5);
  ASSERT_TRUE(q.Admit(r, t0, &wait).ok());  // tokens now at -2
  // A second later the request bucket is full again, the token bucket not:
  // the refusal must leave the request bucket as it was.
  Request again = Of("a", 1, &finals);
  EXPECT_FALSE(q.Admit(again, t0 + absl::Seconds(1), &wait).ok());
  EXPECT_EQ(wait, absl::Seconds(2));
  EXPECT_TRUE(q.Admit(again, t0 + absl::Seconds(3), &wait).ok());
}

TEST(TenantQuotasTest, EachTenantMayHaveLimitsOfItsOwn) {
  TenantLimits defaults;
  defaults.max_sequences = 1;
  QuotaOverrides team_a;
  team_a.max_sequences = 3;
  team_a.tokens_per_second = 5;
  const TenantLimits a = WithOverrides(defaults, team_a);
  EXPECT_EQ(a.max_sequences, 3);
  EXPECT_EQ(a.tokens_per_second, 5);
  EXPECT_EQ(a.requests_per_second, 0);  // left to the default
  TenantQuotas q(defaults, [&](const std::string& tenant) {
    return tenant == "a" ? a : defaults;
  });
  EXPECT_TRUE(q.enabled());
  std::vector<int> finals;
  absl::Duration wait;
  const absl::Time t0 = absl::FromUnixSeconds(1000);
  Request three = Of("a", 3, &finals);
  EXPECT_TRUE(q.Admit(three, t0, &wait).ok());
  EXPECT_EQ(q.token_level("a", t0), 5);
  Request two = Of("b", 2, &finals);
  const absl::Status over = q.Admit(two, t0, &wait);
  EXPECT_EQ(over.code(), absl::StatusCode::kResourceExhausted);
  EXPECT_NE(over.message().find("limit is 1"), std::string::npos) << over;
}

}  // namespace
}  // namespace seqboat
