#include "server/serving_metrics.h"

#include <algorithm>
#include <vector>

namespace seqboat {
namespace {

// Bounds follow vLLM's so histograms compare across servers.
const std::vector<double> kTtftBuckets = {
    0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1,  0.25, 0.5,
    0.75,  1.0,   2.5,  5.0,  7.5,  10.0, 20.0, 40.0, 80.0};
const std::vector<double> kItlBuckets = {
    0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.075, 0.1,
    0.15,  0.2,    0.3,   0.4,  0.5,   0.75, 1.0,   2.5};
const std::vector<double> kRequestBuckets = {
    0.01, 0.03, 0.1,  0.3,  0.5,  0.8,  1.0,  1.5,   2.0,   2.5,   5.0,
    10.0, 15.0, 20.0, 30.0, 40.0, 50.0, 60.0, 120.0, 240.0, 480.0, 960.0};

}  // namespace

std::string StatusCodeName(grpc::StatusCode code) {
  switch (code) {
    case grpc::StatusCode::OK:
      return "OK";
    case grpc::StatusCode::CANCELLED:
      return "CANCELLED";
    case grpc::StatusCode::UNKNOWN:
      return "UNKNOWN";
    case grpc::StatusCode::INVALID_ARGUMENT:
      return "INVALID_ARGUMENT";
    case grpc::StatusCode::DEADLINE_EXCEEDED:
      return "DEADLINE_EXCEEDED";
    case grpc::StatusCode::NOT_FOUND:
      return "NOT_FOUND";
    case grpc::StatusCode::ALREADY_EXISTS:
      return "ALREADY_EXISTS";
    case grpc::StatusCode::PERMISSION_DENIED:
      return "PERMISSION_DENIED";
    case grpc::StatusCode::RESOURCE_EXHAUSTED:
      return "RESOURCE_EXHAUSTED";
    case grpc::StatusCode::FAILED_PRECONDITION:
      return "FAILED_PRECONDITION";
    case grpc::StatusCode::ABORTED:
      return "ABORTED";
    case grpc::StatusCode::OUT_OF_RANGE:
      return "OUT_OF_RANGE";
    case grpc::StatusCode::UNIMPLEMENTED:
      return "UNIMPLEMENTED";
    case grpc::StatusCode::INTERNAL:
      return "INTERNAL";
    case grpc::StatusCode::UNAVAILABLE:
      return "UNAVAILABLE";
    case grpc::StatusCode::DATA_LOSS:
      return "DATA_LOSS";
    case grpc::StatusCode::UNAUTHENTICATED:
      return "UNAUTHENTICATED";
    default:
      return "UNKNOWN";
  }
}

std::string FrontendLabel(Frontend frontend) {
  return frontend == Frontend::kHttp ? "http" : "grpc";
}

std::string FinishReasonLabel(FinishReason reason) {
  switch (reason) {
    case FinishReason::kLength:
      return "length";
    case FinishReason::kStopString:
      return "stop_string";
    case FinishReason::kEos:
      return "eos";
    case FinishReason::kCancelled:
      return "cancelled";
    case FinishReason::kNone:
      break;
  }
  return "none";
}

ServingMetrics::ServingMetrics(MetricsRegistry* registry)
    : calls_(registry->AddCounter(
          "seqboat_requests_total",
          "Generation calls ended, by gRPC status code (refused ones "
          "included; HTTP calls by the code of the same meaning) and "
          "frontend.",
          {"code", "frontend"})),
      success_(registry->AddCounter(
          "seqboat_request_success_total",
          "Requests the engine finished without error, by finish reason.",
          {"finished_reason", "frontend"})),
      prompt_tokens_(registry->AddCounter(
          "seqboat_prompt_tokens_total",
          "Prompt tokens of requests the engine finished.", {"frontend"})),
      generation_tokens_(registry->AddCounter(
          "seqboat_generation_tokens_total",
          "Tokens generated and handed to the streams.", {"frontend"})),
      ttft_(registry->AddHistogram(
          "seqboat_time_to_first_token_seconds",
          "From the call's arrival to its first generated token.", kTtftBuckets,
          {"frontend"})),
      itl_(registry->AddHistogram(
          "seqboat_inter_token_latency_seconds",
          "Between successive token events of one request (one per engine "
          "step).",
          kItlBuckets, {"frontend"})),
      e2e_(registry->AddHistogram(
          "seqboat_e2e_request_latency_seconds",
          "From the call's arrival to the engine's final event.",
          kRequestBuckets, {"frontend"})),
      queue_(registry->AddHistogram(
          "seqboat_request_queue_time_seconds",
          "From the request's arrival to getting a state slot.",
          kRequestBuckets)),
      step_time_(registry->AddHistogram("seqboat_engine_step_duration_seconds",
                                        "Wall time of one engine forward step.",
                                        ExponentialBuckets(0.0001, 2, 17))),
      steps_(registry->AddCounter("seqboat_engine_steps_total",
                                  "Engine forward steps.")),
      step_batch_(registry->AddHistogram(
          "seqboat_engine_step_batch_size",
          "Sequences (decode or prefill chunk) in one engine step.",
          ExponentialBuckets(1, 2, 11))),
      prompt_len_(registry->AddHistogram("seqboat_request_prompt_tokens",
                                         "Prompt length of finished requests.",
                                         ExponentialBuckets(1, 2, 16),
                                         {"frontend"})),
      generation_len_(
          registry->AddHistogram("seqboat_request_generation_tokens",
                                 "Generated tokens of finished requests.",
                                 ExponentialBuckets(1, 2, 16), {"frontend"})),
      tenant_requests_(registry->AddCounter(
          "seqboat_tenant_requests_total",
          "Requests the engine finished without error, by the tenant of "
          "their API key.",
          {"tenant"})),
      tenant_prompt_tokens_(registry->AddCounter(
          "seqboat_tenant_prompt_tokens_total",
          "Prompt tokens of finished requests, by tenant.", {"tenant"})),
      tenant_cached_tokens_(registry->AddCounter(
          "seqboat_tenant_cached_prompt_tokens_total",
          "Of those, tokens resumed from the tenant's prefix cache.",
          {"tenant"})),
      tenant_generation_tokens_(registry->AddCounter(
          "seqboat_tenant_generation_tokens_total",
          "Tokens generated and handed to the streams, by tenant.",
          {"tenant"})) {
  // Both frontends' series exist from the start, at zero, so a rate() over
  // them starts at the process start rather than at the first request.
  for (Frontend frontend : {Frontend::kGrpc, Frontend::kHttp}) {
    const std::vector<std::string> label = {FrontendLabel(frontend)};
    prompt_tokens_->Add(label, 0);
    generation_tokens_->Add(label, 0);
    for (Histogram* h : {ttft_, itl_, e2e_, prompt_len_, generation_len_}) {
      h->Declare(label);
    }
  }
}

void ServingMetrics::OnEvent(RequestTimeline& timeline,
                             const GenerationEvent& event, absl::Time now) {
  const std::vector<std::string> frontend = {FrontendLabel(timeline.frontend)};
  const size_t index = static_cast<size_t>(std::max(event.index, 0));
  if (timeline.last_token.size() <= index) {
    timeline.last_token.resize(index + 1, absl::InfinitePast());
  }
  const std::vector<std::string> tenant = {timeline.tenant};
  if (!event.token_ids.empty()) {
    generation_tokens_->Add(frontend,
                            static_cast<double>(event.token_ids.size()));
    if (!timeline.tenant.empty()) {
      tenant_generation_tokens_->Add(
          tenant, static_cast<double>(event.token_ids.size()));
    }
    if (!timeline.has_token) {
      ttft_->Observe(frontend, absl::ToDoubleSeconds(now - timeline.start));
    } else if (timeline.last_token[index] != absl::InfinitePast()) {
      itl_->Observe(frontend,
                    absl::ToDoubleSeconds(now - timeline.last_token[index]));
    }
    timeline.has_token = true;
    timeline.last_token[index] = now;
  }
  const bool final_event =
      event.finish != FinishReason::kNone || !event.status.ok();
  if (!final_event || !event.status.ok()) return;
  generation_len_->Observe(frontend, event.generated_tokens);
  if (++timeline.finals < timeline.n) return;
  success_->Add({FinishReasonLabel(event.finish), frontend[0]});
  prompt_tokens_->Add(frontend, event.prompt_tokens);
  prompt_len_->Observe(frontend, event.prompt_tokens);
  e2e_->Observe(frontend, absl::ToDoubleSeconds(now - timeline.start));
  if (!timeline.tenant.empty()) {
    tenant_requests_->Add(tenant);
    tenant_prompt_tokens_->Add(tenant, event.prompt_tokens);
    tenant_cached_tokens_->Add(tenant, event.cached_prompt_tokens);
  }
}

void ServingMetrics::OnCallDone(Frontend frontend, grpc::StatusCode code) {
  calls_->Add({StatusCodeName(code), FrontendLabel(frontend)});
}

void ServingMetrics::OnStep(absl::Duration step_time, int32_t batch) {
  steps_->Increment();
  step_time_->Observe(absl::ToDoubleSeconds(step_time));
  step_batch_->Observe(batch);
}

void ServingMetrics::OnAdmit(absl::Duration queue_time) {
  queue_->Observe(absl::ToDoubleSeconds(queue_time));
}

}  // namespace seqboat
