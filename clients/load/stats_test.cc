// Statistics on hand-made timings whose expected values are worked out in
// the comments.
#include "clients/load/stats.h"

#include <cmath>
#include <vector>

#include "gtest/gtest.h"

namespace seqboat {
namespace load {
namespace {

constexpr double kTol = 1e-12;

RequestRecord Ok(double start, std::vector<double> times,
                 std::vector<int64_t> tokens, double end, int64_t prompt) {
  RequestRecord r;
  r.status = "OK";
  r.start = start;
  r.end = end;
  r.chunk_times = std::move(times);
  r.chunk_tokens = tokens;
  r.prompt_tokens = prompt;
  for (int64_t t : tokens) r.output_tokens += t;
  return r;
}

TEST(PercentileTest, MatchesNumpyLinearInterpolation) {
  const std::vector<double> v = {1, 2, 3, 4, 10};
  // rank = q/100 * (n-1): p50 -> 2 -> 3; p90 -> 3.6 -> 4 + 0.6*6 = 7.6;
  // p99 -> 3.96 -> 4 + 0.96*6 = 9.76; p25 -> 1 -> 2.
  EXPECT_DOUBLE_EQ(Percentile(v, 50), 3);
  EXPECT_NEAR(Percentile(v, 90), 7.6, kTol);
  EXPECT_NEAR(Percentile(v, 99), 9.76, kTol);
  EXPECT_DOUBLE_EQ(Percentile(v, 25), 2);
  EXPECT_DOUBLE_EQ(Percentile(v, 0), 1);
  EXPECT_DOUBLE_EQ(Percentile(v, 100), 10);
  EXPECT_DOUBLE_EQ(Percentile({7}, 99), 7);
  EXPECT_DOUBLE_EQ(Percentile({}, 50), 0);
  // Even count: the median is the mean of the middle two.
  EXPECT_DOUBLE_EQ(Percentile({1, 2, 3, 4}, 50), 2.5);
}

TEST(DescribeTest, MeanStdMinMax) {
  // mean 4; squared deviations 9+1+1+9 = 20; population var 5.
  const Distribution d = Describe({7, 1, 5, 3});
  EXPECT_EQ(d.count, 4);
  EXPECT_DOUBLE_EQ(d.mean, 4);
  EXPECT_NEAR(d.std, std::sqrt(5.0), kTol);
  EXPECT_DOUBLE_EQ(d.min, 1);
  EXPECT_DOUBLE_EQ(d.max, 7);
  EXPECT_DOUBLE_EQ(d.p50, 4);  // (3 + 5) / 2
}

TEST(TimingsTest, OneTokenPerMessage) {
  // Start 10.0; tokens at 10.5, 10.6, 10.8, 11.1; the final message (no
  // tokens) at 11.1 as well.
  const RequestRecord r =
      Ok(10.0, {10.5, 10.6, 10.8, 11.1}, {1, 1, 1, 1}, 11.1, 5);
  const RequestTimings t = TimingsOf(r);
  EXPECT_NEAR(t.ttft, 0.5, kTol);
  EXPECT_NEAR(t.e2el, 1.1, kTol);
  ASSERT_EQ(t.itl.size(), 3u);
  EXPECT_NEAR(t.itl[0], 0.1, kTol);
  EXPECT_NEAR(t.itl[1], 0.2, kTol);
  EXPECT_NEAR(t.itl[2], 0.3, kTol);
  // (1.1 - 0.5) / (4 - 1) = 0.2
  EXPECT_NEAR(t.tpot, 0.2, kTol);
}

TEST(TimingsTest, CoalescedMessageIsOneGapButAllItsTokensCountForTpot) {
  // 2 tokens at 1.0, then 3 tokens in one message at 1.4: one ITL of 0.4,
  // output 5 tokens, E2E 1.4 -> TPOT (1.4 - 1.0) / 4 = 0.1.
  const RequestRecord r = Ok(0.0, {1.0, 1.4}, {2, 3}, 1.4, 1);
  const RequestTimings t = TimingsOf(r);
  EXPECT_NEAR(t.ttft, 1.0, kTol);
  ASSERT_EQ(t.itl.size(), 1u);
  EXPECT_NEAR(t.itl[0], 0.4, kTol);
  EXPECT_NEAR(t.tpot, 0.1, kTol);
}

TEST(TimingsTest, SingleTokenHasNoTpot) {
  const RequestTimings t = TimingsOf(Ok(0, {0.3}, {1}, 0.3, 1));
  EXPECT_NEAR(t.ttft, 0.3, kTol);
  EXPECT_EQ(t.tpot, -1);
  EXPECT_TRUE(t.itl.empty());
}

TEST(SummarizeTest, ThroughputsPercentilesAndErrors) {
  std::vector<RequestRecord> records;
  // A: start 0, tokens at 1, 2, 4 (1 each), end 4: TTFT 1, ITL {1, 2},
  //    E2E 4, TPOT (4 - 1) / 2 = 1.5.
  records.push_back(Ok(0, {1, 2, 4}, {1, 1, 1}, 4, 10));
  // B: start 1, tokens at 3 (2 tokens), 4 (1 token), end 5 (final message
  //    without tokens): TTFT 2, ITL {1}, E2E 4, TPOT (4 - 2) / 2 = 1.
  records.push_back(Ok(1, {3, 4}, {2, 1}, 5, 20));
  // C: one token: TTFT 0.5, no ITL, E2E 0.5, no TPOT.
  records.push_back(Ok(2, {2.5}, {1}, 2.5, 30));
  // Failures count by code and stay out of every figure.
  RequestRecord failed = Ok(0, {0.1}, {100}, 9, 1000);
  failed.status = "UNAVAILABLE";
  records.push_back(failed);
  failed.status = "RESOURCE_EXHAUSTED";
  records.push_back(failed);
  failed.status = "UNAVAILABLE";
  records.push_back(failed);

  const Summary s = Summarize(records, /*duration_s=*/5.0);
  EXPECT_EQ(s.completed, 3);
  EXPECT_EQ(s.failed, 3);
  EXPECT_EQ(s.total_input_tokens, 60);
  EXPECT_EQ(s.total_output_tokens, 7);
  EXPECT_DOUBLE_EQ(s.request_throughput, 3.0 / 5.0);
  EXPECT_DOUBLE_EQ(s.output_throughput, 7.0 / 5.0);
  EXPECT_DOUBLE_EQ(s.total_token_throughput, 67.0 / 5.0);
  EXPECT_EQ(s.status_counts.at("OK"), 3);
  EXPECT_EQ(s.status_counts.at("UNAVAILABLE"), 2);
  EXPECT_EQ(s.status_counts.at("RESOURCE_EXHAUSTED"), 1);

  // TTFT {0.5, 1, 2}: mean 3.5/3, p50 1, p90 rank 1.8 -> 1 + 0.8 = 1.8,
  // p99 rank 1.98 -> 1.98.
  EXPECT_EQ(s.ttft_s.count, 3);
  EXPECT_NEAR(s.ttft_s.mean, 3.5 / 3, kTol);
  EXPECT_NEAR(s.ttft_s.p50, 1.0, kTol);
  EXPECT_NEAR(s.ttft_s.p90, 1.8, kTol);
  EXPECT_NEAR(s.ttft_s.p99, 1.98, kTol);
  // ITL {1, 2, 1} -> sorted {1, 1, 2}: mean 4/3, p50 1, p90 1.8, p99 1.98.
  EXPECT_EQ(s.itl_s.count, 3);
  EXPECT_NEAR(s.itl_s.mean, 4.0 / 3, kTol);
  EXPECT_NEAR(s.itl_s.p50, 1.0, kTol);
  EXPECT_NEAR(s.itl_s.p90, 1.8, kTol);
  EXPECT_NEAR(s.itl_s.p99, 1.98, kTol);
  // TPOT {1.5, 1}: mean 1.25, p50 1.25, p90 rank 0.9 -> 1.45, p99 1.495.
  EXPECT_EQ(s.tpot_s.count, 2);
  EXPECT_NEAR(s.tpot_s.mean, 1.25, kTol);
  EXPECT_NEAR(s.tpot_s.p50, 1.25, kTol);
  EXPECT_NEAR(s.tpot_s.p90, 1.45, kTol);
  EXPECT_NEAR(s.tpot_s.p99, 1.495, kTol);
  // E2E {4, 4, 0.5}: mean 8.5/3, p50 4, max 4, min 0.5.
  EXPECT_NEAR(s.e2el_s.mean, 8.5 / 3, kTol);
  EXPECT_NEAR(s.e2el_s.p50, 4.0, kTol);
  EXPECT_NEAR(s.e2el_s.min, 0.5, kTol);
  EXPECT_NEAR(s.e2el_s.max, 4.0, kTol);
}

TEST(SummarizeTest, NothingSucceeded) {
  RequestRecord r;
  r.status = "UNAVAILABLE";
  const Summary s = Summarize({r}, 0);
  EXPECT_EQ(s.completed, 0);
  EXPECT_EQ(s.failed, 1);
  EXPECT_EQ(s.request_throughput, 0);
  EXPECT_EQ(s.ttft_s.count, 0);
  EXPECT_EQ(s.ttft_s.p99, 0);
}

}  // namespace
}  // namespace load
}  // namespace seqboat
