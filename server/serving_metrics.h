// The server's metric set on a MetricsRegistry. Names use the `seqboat_`
// prefix with the meaning of vLLM's metric of the same suffix (e.g.
// seqboat_time_to_first_token_seconds is vllm:time_to_first_token_seconds),
// so dashboards written for vLLM port by renaming. deploy/README.md lists
// every name.
//
// Per-request timings are taken where the server sees the engine's events
// (GenerateStream's sink), engine timings through EngineOptions' observers,
// and the gauges are read from Engine::Stats() when scraped (engine_gauges.h).
#ifndef SEQBOAT_SERVER_SERVING_METRICS_H_
#define SEQBOAT_SERVER_SERVING_METRICS_H_

#include <grpcpp/grpcpp.h>

#include <cstdint>
#include <string>
#include <vector>

#include "absl/time/time.h"
#include "engine/request.h"
#include "server/metrics.h"

namespace seqboat {

// Which API a request came through; the per-request series carry it as
// their `frontend` label ("grpc" or "http"), so both share one set of names.
enum class Frontend { kGrpc, kHttp };

// What the metrics need to remember about one request between its events.
struct RequestTimeline {
  Frontend frontend = Frontend::kGrpc;
  // Its key's tenant: the `tenant` label of the per-tenant series ("" on a
  // server without keys: none are recorded). Never the key.
  std::string tenant;
  absl::Time start;  // when the call arrived
  bool has_token = false;
  int32_t n = 1;       // the request's sequences
  int32_t finals = 0;  // of them, ended without error so far
  // Per sequence: when its last token arrived (InfinitePast before one).
  std::vector<absl::Time> last_token;
};

class ServingMetrics {
 public:
  // Adds the request and engine metric families to `registry`, which must
  // outlive this object.
  explicit ServingMetrics(MetricsRegistry* registry);

  // One engine event of a request, seen at `now`. A request of n sequences
  // counts its time to first token once (its first token), inter-token
  // latency within each sequence, the generation length of each, and its
  // prompt, end-to-end time and success once, when the last of them ends;
  // with a tenant, its requests, prompt, cached prompt and generated tokens.
  void OnEvent(RequestTimeline& timeline, const GenerationEvent& event,
               absl::Time now);
  // The call ended with `code` (including calls refused before reaching the
  // engine). HTTP calls report the gRPC code of the same meaning.
  void OnCallDone(Frontend frontend, grpc::StatusCode code);
  // Engine observers (see EngineOptions::on_step and on_admit).
  void OnStep(absl::Duration step_time, int32_t batch);
  void OnAdmit(absl::Duration queue_time);

  // Read-only access for tests.
  const Counter& generation_tokens() const { return *generation_tokens_; }
  const Counter& calls() const { return *calls_; }

 private:
  Counter* calls_;
  Counter* success_;
  Counter* prompt_tokens_;
  Counter* generation_tokens_;
  Histogram* ttft_;
  Histogram* itl_;
  Histogram* e2e_;
  Histogram* queue_;
  Histogram* step_time_;
  Counter* steps_;
  Histogram* step_batch_;
  Histogram* prompt_len_;
  Histogram* generation_len_;
  // Per tenant (servers with API keys).
  Counter* tenant_requests_;
  Counter* tenant_prompt_tokens_;
  Counter* tenant_cached_tokens_;
  Counter* tenant_generation_tokens_;
};

// "grpc" or "http".
std::string FrontendLabel(Frontend frontend);
// "OK", "CANCELLED", ... as in the gRPC status code documentation.
std::string StatusCodeName(grpc::StatusCode code);
// "length", "stop_string", "eos" or "cancelled".
std::string FinishReasonLabel(FinishReason reason);

}  // namespace seqboat

#endif  // SEQBOAT_SERVER_SERVING_METRICS_H_
