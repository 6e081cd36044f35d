#include "server/serving_metrics.h"

#include <string>

#include "absl/time/time.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "server/metrics.h"

namespace seqboat {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

GenerationEvent Tokens(int n) {
  GenerationEvent e;
  for (int i = 0; i < n; ++i) e.token_ids.push_back(i);
  return e;
}

TEST(ServingMetricsTest, RequestTimingsFromEvents) {
  MetricsRegistry registry;
  ServingMetrics metrics(&registry);
  const absl::Time t0 = absl::FromUnixSeconds(1000);
  RequestTimeline timeline;
  timeline.start = t0;
  // First token after 0.25 s, then gaps of 0.05 s and 0.02 s; the final
  // event has no tokens and ends 1.5 s after arrival.
  metrics.OnEvent(timeline, Tokens(1), t0 + absl::Milliseconds(250));
  metrics.OnEvent(timeline, Tokens(2), t0 + absl::Milliseconds(300));
  metrics.OnEvent(timeline, Tokens(1), t0 + absl::Milliseconds(320));
  GenerationEvent last;
  last.finish = FinishReason::kLength;
  last.prompt_tokens = 7;
  last.generated_tokens = 4;
  metrics.OnEvent(timeline, last, t0 + absl::Milliseconds(1500));
  metrics.OnCallDone(Frontend::kGrpc, grpc::StatusCode::OK);

  EXPECT_EQ(metrics.generation_tokens().Value({"grpc"}), 4);
  EXPECT_EQ(metrics.generation_tokens().Value({"http"}), 0);
  const std::string text = registry.Render();
  EXPECT_THAT(
      text,
      HasSubstr(
          "seqboat_time_to_first_token_seconds_sum{frontend=\"grpc\"} 0.25\n"));
  EXPECT_THAT(text,
              HasSubstr("seqboat_time_to_first_token_seconds_count{frontend="
                        "\"grpc\"} 1\n"));
  EXPECT_THAT(text,
              HasSubstr("seqboat_inter_token_latency_seconds_count{frontend="
                        "\"grpc\"} 2\n"));
  EXPECT_THAT(
      text,
      HasSubstr(
          "seqboat_inter_token_latency_seconds_bucket{frontend=\"grpc\",le="
          "\"0.025\"} 1\n"));
  EXPECT_THAT(text,
              HasSubstr("seqboat_inter_token_latency_seconds_bucket{frontend="
                        "\"grpc\",le=\"0.05\"} 2\n"));
  EXPECT_THAT(text,
              HasSubstr("seqboat_e2e_request_latency_seconds_sum{frontend="
                        "\"grpc\"} 1.5\n"));
  EXPECT_THAT(text,
              HasSubstr("seqboat_prompt_tokens_total{frontend=\"grpc\"} 7\n"));
  EXPECT_THAT(
      text,
      HasSubstr("seqboat_generation_tokens_total{frontend=\"grpc\"} 4\n"));
  EXPECT_THAT(
      text,
      HasSubstr(
          "seqboat_request_success_total{finished_reason=\"length\",frontend="
          "\"grpc\"} 1\n"));
  EXPECT_THAT(
      text,
      HasSubstr("seqboat_requests_total{code=\"OK\",frontend=\"grpc\"} 1\n"));
  // The other frontend's series exist at zero.
  EXPECT_THAT(text, HasSubstr("seqboat_generation_tokens_total{frontend="
                              "\"http\"} 0\n"));
  EXPECT_THAT(text, HasSubstr("seqboat_time_to_first_token_seconds_count{"
                              "frontend=\"http\"} 0\n"));
}

// n = 2: the first token counts the time to first token; inter-token
// latency runs within each sequence; the prompt, the success and the
// end-to-end time count once, when the last sequence ends.
TEST(ServingMetricsTest, ARequestOfNSequencesCountsItsPromptOnce) {
  MetricsRegistry registry;
  ServingMetrics metrics(&registry);
  const absl::Time t0 = absl::FromUnixSeconds(1000);
  RequestTimeline timeline;
  timeline.start = t0;
  timeline.n = 2;
  const auto event = [](int32_t index, int tokens) {
    GenerationEvent e = Tokens(tokens);
    e.index = index;
    return e;
  };
  metrics.OnEvent(timeline, event(0, 1), t0 + absl::Milliseconds(200));
  metrics.OnEvent(timeline, event(1, 1), t0 + absl::Milliseconds(201));
  metrics.OnEvent(timeline, event(0, 1), t0 + absl::Milliseconds(325));
  metrics.OnEvent(timeline, event(1, 1), t0 + absl::Milliseconds(451));
  GenerationEvent last = event(1, 0);
  last.finish = FinishReason::kEos;
  last.prompt_tokens = 7;
  last.generated_tokens = 2;
  metrics.OnEvent(timeline, last, t0 + absl::Milliseconds(400));
  std::string text = registry.Render();
  EXPECT_THAT(text, HasSubstr("seqboat_prompt_tokens_total{frontend="
                              "\"grpc\"} 0\n"));
  last.index = 0;
  last.finish = FinishReason::kLength;
  metrics.OnEvent(timeline, last, t0 + absl::Milliseconds(500));
  text = registry.Render();
  EXPECT_EQ(metrics.generation_tokens().Value({"grpc"}), 4);
  EXPECT_THAT(text,
              HasSubstr("seqboat_time_to_first_token_seconds_count{frontend="
                        "\"grpc\"} 1\n"));
  // 0.125 s in sequence 0, 0.25 s in sequence 1.
  EXPECT_THAT(text,
              HasSubstr("seqboat_inter_token_latency_seconds_count{frontend="
                        "\"grpc\"} 2\n"));
  EXPECT_THAT(text,
              HasSubstr("seqboat_inter_token_latency_seconds_sum{frontend="
                        "\"grpc\"} 0.375\n"));
  EXPECT_THAT(text,
              HasSubstr("seqboat_prompt_tokens_total{frontend=\"grpc\"} 7\n"));
  EXPECT_THAT(text,
              HasSubstr("seqboat_request_generation_tokens_count{frontend="
                        "\"grpc\"} 2\n"));
  EXPECT_THAT(text,
              HasSubstr("seqboat_e2e_request_latency_seconds_sum{frontend="
                        "\"grpc\"} 0.5\n"));
  EXPECT_THAT(
      text,
      HasSubstr(
          "seqboat_request_success_total{finished_reason=\"length\",frontend="
          "\"grpc\"} 1\n"));
}

TEST(ServingMetricsTest, ErrorEndsCountNoSuccessButKeepStreamedTokens) {
  MetricsRegistry registry;
  ServingMetrics metrics(&registry);
  RequestTimeline timeline;
  timeline.frontend = Frontend::kHttp;
  timeline.start = absl::FromUnixSeconds(0);
  metrics.OnEvent(timeline, Tokens(3), absl::FromUnixSeconds(1));
  GenerationEvent failed;
  failed.finish = FinishReason::kCancelled;
  failed.status = absl::DeadlineExceededError("deadline passed");
  metrics.OnEvent(timeline, failed, absl::FromUnixSeconds(2));
  metrics.OnCallDone(Frontend::kHttp, grpc::StatusCode::DEADLINE_EXCEEDED);
  metrics.OnCallDone(Frontend::kGrpc, grpc::StatusCode::RESOURCE_EXHAUSTED);

  const std::string text = registry.Render();
  EXPECT_THAT(
      text,
      HasSubstr("seqboat_generation_tokens_total{frontend=\"http\"} 3\n"));
  EXPECT_THAT(text, Not(HasSubstr("seqboat_request_success_total{")));
  EXPECT_THAT(text,
              HasSubstr("seqboat_e2e_request_latency_seconds_count{frontend="
                        "\"http\"} 0\n"));
  EXPECT_THAT(
      text,
      HasSubstr("seqboat_requests_total{code=\"DEADLINE_EXCEEDED\",frontend="
                "\"http\"} 1"));
  EXPECT_THAT(
      text,
      HasSubstr("seqboat_requests_total{code=\"RESOURCE_EXHAUSTED\",frontend="
                "\"grpc\"} 1"));
}

TEST(ServingMetricsTest, EngineObservers) {
  MetricsRegistry registry;
  ServingMetrics metrics(&registry);
  metrics.OnStep(absl::Microseconds(150), 3);
  metrics.OnStep(absl::Microseconds(50), 1);
  metrics.OnAdmit(absl::Milliseconds(20));
  const std::string text = registry.Render();
  EXPECT_THAT(text, HasSubstr("seqboat_engine_steps_total 2\n"));
  EXPECT_THAT(
      text,
      HasSubstr(
          "seqboat_engine_step_duration_seconds_bucket{le=\"0.0001\"} 1\n"));
  EXPECT_THAT(text, HasSubstr("seqboat_engine_step_batch_size_sum 4\n"));
  EXPECT_THAT(text, HasSubstr("seqboat_request_queue_time_seconds_sum 0.02\n"));
}

TEST(ServingMetricsTest, Names) {
  EXPECT_EQ(StatusCodeName(grpc::StatusCode::UNAVAILABLE), "UNAVAILABLE");
  EXPECT_EQ(FinishReasonLabel(FinishReason::kStopString), "stop_string");
  EXPECT_EQ(FrontendLabel(Frontend::kGrpc), "grpc");
  EXPECT_EQ(FrontendLabel(Frontend::kHttp), "http");
}

}  // namespace
}  // namespace seqboat
