#include "clients/load/stream.h"

#include <utility>

#include "absl/strings/str_cat.h"

namespace seqboat {
namespace load {
namespace {

double Seconds(Clock::time_point t, Clock::time_point origin) {
  return std::chrono::duration<double>(t - origin).count();
}

// Deletes itself when gRPC is done with it.
class Call final : public grpc::ClientReadReactor<v1::GenerateResponse> {
 public:
  Call(v1::TextGeneration::Stub* stub, v1::GenerateRequest request,
       Clock::time_point origin, double timeout_s, bool keep_token_ids,
       StreamCallbacks callbacks, StreamTracker& tracker,
       const std::string& session_id)
      : registration_(tracker),
        request_(std::move(request)),
        origin_(origin),
        keep_token_ids_(keep_token_ids),
        callbacks_(std::move(callbacks)) {
    outcome_.record.request_id = request_.request_id();
    outcome_.record.prompt_tokens =
        request_.has_token_ids() ? request_.token_ids().ids_size() : 0;
    context_.set_deadline(std::chrono::system_clock::now() +
                          std::chrono::duration_cast<std::chrono::nanoseconds>(
                              std::chrono::duration<double>(timeout_s)));
    if (!session_id.empty()) context_.AddMetadata("x-session-id", session_id);
    stub->async()->Generate(&context_, &request_, this);
    outcome_.record.start = Seconds(Clock::now(), origin_);
    outcome_.record.end = outcome_.record.start;
    StartRead(&message_);
    StartCall();
  }

  void OnReadDone(bool ok) override {
    if (!ok) return;  // the stream ended; OnDone follows
    RequestRecord& record = outcome_.record;
    const double now = Seconds(Clock::now(), origin_);
    record.end = now;
    const int64_t n = message_.token_ids_size();
    if (n > 0) {
      record.chunk_times.push_back(now);
      record.chunk_tokens.push_back(n);
      streamed_tokens_ += n;
      if (keep_token_ids_) {
        outcome_.token_ids.insert(outcome_.token_ids.end(),
                                  message_.token_ids().begin(),
                                  message_.token_ids().end());
      }
      if (callbacks_.on_tokens) callbacks_.on_tokens(n);
    }
    if (message_.has_usage()) {
      usage_tokens_ = message_.usage().generated_tokens();
      if (message_.usage().prompt_tokens() > 0) {
        record.prompt_tokens = message_.usage().prompt_tokens();
      }
      record.cached_prompt_tokens = message_.usage().cached_prompt_tokens();
    }
    StartRead(&message_);
  }

  void OnDone(const grpc::Status& status) override {
    RequestRecord& record = outcome_.record;
    outcome_.done_s = Seconds(Clock::now(), origin_);
    record.status = StatusCodeName(status.error_code());
    if (record.chunk_times.empty()) record.end = outcome_.done_s;
    record.output_tokens =
        usage_tokens_ >= 0 ? usage_tokens_ : streamed_tokens_;
    if (callbacks_.on_done) callbacks_.on_done(std::move(outcome_));
    delete this;
  }

 private:
  // First, so that it is freed last: after context_.
  StreamTracker::Registration registration_;
  grpc::ClientContext context_;
  v1::GenerateRequest request_;
  v1::GenerateResponse message_;
  const Clock::time_point origin_;
  const bool keep_token_ids_;
  const StreamCallbacks callbacks_;
  StreamOutcome outcome_;
  int64_t streamed_tokens_ = 0;
  int64_t usage_tokens_ = -1;
};

}  // namespace

StreamTracker::Registration::Registration(StreamTracker& tracker)
    : state_(tracker.state_) {
  std::lock_guard<std::mutex> guard(state_->mu);
  ++state_->live;
}

StreamTracker::Registration::~Registration() {
  std::lock_guard<std::mutex> guard(state_->mu);
  if (--state_->live == 0) state_->cv.notify_all();
}

void StreamTracker::Wait() {
  std::unique_lock<std::mutex> lock(state_->mu);
  state_->cv.wait(lock, [this] { return state_->live == 0; });
}

std::string StatusCodeName(grpc::StatusCode code) {
  static constexpr const char* kNames[] = {"OK",
                                           "CANCELLED",
                                           "UNKNOWN",
                                           "INVALID_ARGUMENT",
                                           "DEADLINE_EXCEEDED",
                                           "NOT_FOUND",
                                           "ALREADY_EXISTS",
                                           "PERMISSION_DENIED",
                                           "RESOURCE_EXHAUSTED",
                                           "FAILED_PRECONDITION",
                                           "ABORTED",
                                           "OUT_OF_RANGE",
                                           "UNIMPLEMENTED",
                                           "INTERNAL",
                                           "UNAVAILABLE",
                                           "DATA_LOSS",
                                           "UNAUTHENTICATED"};
  const int i = static_cast<int>(code);
  return i >= 0 && i < 17 ? kNames[i] : absl::StrCat("CODE_", i);
}

void StartGenerateStream(v1::TextGeneration::Stub* stub,
                         v1::GenerateRequest request, Clock::time_point origin,
                         double timeout_s, bool keep_token_ids,
                         StreamCallbacks callbacks, StreamTracker& tracker,
                         const std::string& session_id) {
  new Call(stub, std::move(request), origin, timeout_s, keep_token_ids,
           std::move(callbacks), tracker, session_id);
}

}  // namespace load
}  // namespace seqboat
