// Drives the chat workload (clients/load/chat.h) against a target: up to
// `concurrency` conversations in flight, each one turn at a time, the next
// turn sent as soon as the previous answer has fully arrived (no think time).
#ifndef SEQBOAT_CLIENTS_LOAD_CHAT_RUNNER_H_
#define SEQBOAT_CLIENTS_LOAD_CHAT_RUNNER_H_

#include <grpcpp/grpcpp.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "clients/load/chat.h"

namespace seqboat {
namespace load {

struct ChatRunOptions {
  ChatSpec spec;
  int32_t concurrency = 1;  // conversations in flight
  double request_timeout_s = 600;
  float temperature = 0;
  bool ignore_eos = true;
  std::string request_id_prefix = "chat";
  // Each conversation's turns carry x-session-id: <request_id_prefix>-c<i>,
  // for a balancer that hashes it (consistent hashing in nginx).
  bool session_ids = false;
  // Turns advance together: the next turn of any conversation (and a new
  // conversation) starts only once nothing is in flight.
  bool lockstep = false;
};

absl::Status ValidateChatRunOptions(const ChatRunOptions& options);

struct ChatProgress {
  int64_t conversations_done = 0;
  int64_t turns_done = 0;
  int64_t failed = 0;
  int64_t in_flight = 0;
  int64_t output_tokens = 0;
  double elapsed_s = 0;
};

struct ChatRunResult {
  std::vector<ChatTurnRecord> turns;  // in the order they ended
  double duration_s = 0;              // first start to last end
};

// Runs every conversation to its last turn or its first failed one.
// Conversation i talks over channels[i % size] throughout, so that behind a
// balancer with per-connection routing its turns reach the replica holding
// its cached state. `on_progress` (optional) runs about once a second on the
// calling thread.
absl::StatusOr<ChatRunResult> RunChat(
    const std::vector<std::shared_ptr<grpc::Channel>>& channels,
    const ChatRunOptions& options,
    const std::function<void(const ChatProgress&)>& on_progress);

}  // namespace load
}  // namespace seqboat

#endif  // SEQBOAT_CLIENTS_LOAD_CHAT_RUNNER_H_
