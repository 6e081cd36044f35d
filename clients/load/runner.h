// Drives Generate streams against a target with gRPC's callback API and
// records each stream's message arrival times. Closed loop: `concurrency`
// streams always in flight. Open loop: Poisson arrivals at `request_rate`,
// at most `max_inflight` in flight (later arrivals wait for a free place,
// like vLLM's --max-concurrency).
#ifndef SEQBOAT_CLIENTS_LOAD_RUNNER_H_
#define SEQBOAT_CLIENTS_LOAD_RUNNER_H_

#include <grpcpp/grpcpp.h>

#include <cstdint>
#include <functional>
#include <limits>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "clients/load/stats.h"
#include "clients/load/workload.h"

namespace seqboat {
namespace load {

struct RunOptions {
  int32_t concurrency = 0;  // > 0: closed loop
  double request_rate = std::numeric_limits<double>::infinity();
  int32_t max_inflight = 0;  // open loop; 0: no limit
  int64_t num_requests = 0;  // 0: until duration_s
  double duration_s = 0;     // 0: until num_requests
  uint64_t seed = 0;
  double request_timeout_s = 600;  // gRPC deadline of each stream
  float temperature = 0;
  bool ignore_eos = true;
  int32_t default_max_new_tokens = 128;
  std::string request_id_prefix = "load";
};

absl::Status ValidateRunOptions(const RunOptions& options);

struct Progress {
  int64_t started = 0;
  int64_t finished = 0;
  int64_t failed = 0;
  int64_t in_flight = 0;
  int64_t output_tokens = 0;  // received so far, every stream
  double elapsed_s = 0;
};

struct RunResult {
  std::vector<RequestRecord> records;  // in the order requests were started
  double duration_s = 0;               // first start to last end
};

// Request i's prompt; called on the driving thread only.
using PromptSource = std::function<Prompt(int64_t index)>;

// Runs until the request count or duration is reached and every started
// stream ended (each bounded by its deadline). Requests go round-robin over
// `channels`. `on_progress` (optional) runs about once a second.
absl::StatusOr<RunResult> RunLoad(
    const std::vector<std::shared_ptr<grpc::Channel>>& channels,
    const RunOptions& options, const PromptSource& prompts,
    const std::function<void(const Progress&)>& on_progress);

}  // namespace load
}  // namespace seqboat

#endif  // SEQBOAT_CLIENTS_LOAD_RUNNER_H_
