// One Generate stream on gRPC's callback API, recording each message's
// arrival time. Shared by the request-level driver (runner) and the chat
// driver (chat_runner), so both measure TTFT and E2E the same way.
#ifndef SEQBOAT_CLIENTS_LOAD_STREAM_H_
#define SEQBOAT_CLIENTS_LOAD_STREAM_H_

#include <grpcpp/grpcpp.h>

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "clients/load/stats.h"
#include "seqboat/v1/generate.grpc.pb.h"

namespace seqboat {
namespace load {

using Clock = std::chrono::steady_clock;

// "OK", "UNAVAILABLE", ...: the names the result JSON counts failures by.
std::string StatusCodeName(grpc::StatusCode code);

struct StreamOutcome {
  RequestRecord record;  // times in seconds from the `origin` given below
  // Every token id streamed, in order; only filled when asked for, since a
  // long request-level run has no use for them.
  std::vector<int32_t> token_ids;
  double done_s = 0;  // when gRPC ended the call (>= record.end)
};

struct StreamCallbacks {
  // For each message that carries tokens: how many. On a gRPC thread.
  std::function<void(int64_t tokens)> on_tokens;
  // Once, when the stream has ended. On a gRPC thread; the stream is freed
  // after it returns.
  std::function<void(StreamOutcome outcome)> on_done;
};

// The streams started with it. A stream's on_done runs before gRPC's own
// objects of the call (its ClientContext) are freed, so a driver that
// returns once every on_done has run can still race them: against the stub's
// channel going away and against the library's shutdown as main returns.
// Wait (and the destructor) return only once every stream is freed.
class StreamTracker {
 private:
  struct State {
    std::mutex mu;
    std::condition_variable cv;
    int64_t live = 0;
  };

 public:
  StreamTracker() : state_(std::make_shared<State>()) {}
  ~StreamTracker() { Wait(); }
  StreamTracker(const StreamTracker&) = delete;
  StreamTracker& operator=(const StreamTracker&) = delete;

  void Wait();

  // Held by each stream for its whole life. It shares the count, which so
  // outlives the tracker when a stream is freed last.
  class Registration {
   public:
    explicit Registration(StreamTracker& tracker);
    ~Registration();
    Registration(const Registration&) = delete;
    Registration& operator=(const Registration&) = delete;

   private:
    std::shared_ptr<State> state_;
  };

 private:
  std::shared_ptr<State> state_;
};

// Starts the call and returns; `stub` must outlive the call's start, and
// `tracker` the call. The callbacks may run before this returns. A non-empty
// `session_id` goes out as the x-session-id metadata, the key a balancer
// keeps a conversation's turns on one replica by (deploy/k8s/nginx.conf).
void StartGenerateStream(v1::TextGeneration::Stub* stub,
                         v1::GenerateRequest request, Clock::time_point origin,
                         double timeout_s, bool keep_token_ids,
                         StreamCallbacks callbacks, StreamTracker& tracker,
                         const std::string& session_id = "");

}  // namespace load
}  // namespace seqboat

#endif  // SEQBOAT_CLIENTS_LOAD_STREAM_H_
