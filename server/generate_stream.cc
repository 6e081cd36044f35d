#include "server/generate_stream.h"

#include <algorithm>
#include <optional>
#include <utility>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "server/grpc_status.h"
#include "server/response_coalescer.h"
#include "spdlog/spdlog.h"

namespace seqboat {

struct GenerateStream::State {
  State(std::string id, std::shared_ptr<RequestControl> ctl, ServingMetrics* m)
      : request_id(std::move(id)), control(std::move(ctl)), metrics(m) {
    timeline.start = start;
  }

  const std::string request_id;
  const std::shared_ptr<RequestControl> control;
  ServingMetrics* const metrics;  // may be null
  const absl::Time start = absl::Now();

  absl::Mutex mu;
  RequestTimeline timeline ABSL_GUARDED_BY(mu);
  // Null once OnDone ran; from then on events are dropped.
  GenerateStream* reactor ABSL_GUARDED_BY(mu) = nullptr;
  std::vector<GenerationEvent> pending ABSL_GUARDED_BY(mu);
  int32_t n ABSL_GUARDED_BY(mu) = 1;  // the request's sequences
  // Sequences whose final event the engine delivered, and whose last
  // message was written.
  int32_t engine_finals ABSL_GUARDED_BY(mu) = 0;
  int32_t written_finals ABSL_GUARDED_BY(mu) = 0;
  // The engine delivered its last event (every sequence's final one, or an
  // error); later calls are ignored.
  bool engine_done ABSL_GUARDED_BY(mu) = false;
  bool write_in_flight ABSL_GUARDED_BY(mu) = false;
  // Finish or StartWriteAndFinish was called; nothing may follow.
  bool finish_started ABSL_GUARDED_BY(mu) = false;
  // How the call will end once the in-flight write (if any) completes.
  std::optional<grpc::Status> finish_status ABSL_GUARDED_BY(mu);
  // The message being written, and its bytes. Only the thread that set
  // write_in_flight or finish_started touches them until the write completes.
  v1::GenerateResponse out;
  grpc::ByteBuffer out_bytes;

  // For the per-request log line.
  int64_t events = 0;
  int64_t messages = 0;
  v1::FinishReason finish_reason = v1::FINISH_REASON_UNSPECIFIED;
  uint32_t generated_tokens = 0;
};

grpc::ByteBuffer SerializeToByteBuffer(
    const google::protobuf::Message& message) {
  grpc::Slice slice(message.SerializeAsString());
  return grpc::ByteBuffer(&slice, 1);
}

bool ParseFromByteBuffer(const grpc::ByteBuffer& bytes,
                         google::protobuf::Message* message) {
  std::vector<grpc::Slice> slices;
  if (!bytes.Dump(&slices).ok()) return false;
  std::string wire;
  wire.reserve(bytes.Length());
  for (const grpc::Slice& slice : slices) {
    wire.append(reinterpret_cast<const char*>(slice.begin()), slice.size());
  }
  return message->ParseFromString(wire);
}

GenerateStream::GenerateStream(std::string request_id,
                               std::shared_ptr<RequestControl> control,
                               std::function<void()> on_done,
                               ServingMetrics* metrics)
    : state_(std::make_shared<State>(std::move(request_id), std::move(control),
                                     metrics)),
      on_done_(std::move(on_done)) {
  absl::MutexLock lock(&state_->mu);
  state_->reactor = this;
}

EventSink GenerateStream::sink(int32_t n, std::string tenant) {
  {
    absl::MutexLock lock(&state_->mu);
    state_->n = std::max(n, 1);
    state_->timeline.n = state_->n;
    state_->timeline.tenant = std::move(tenant);
  }
  return [state = state_](GenerationEvent event) {
    {
      absl::MutexLock lock(&state->mu);
      if (state->engine_done) return;
      if (!event.status.ok()) {
        state->engine_done = true;
      } else if (event.finish != FinishReason::kNone) {
        state->engine_done = ++state->engine_finals >= state->n;
      }
      ++state->events;
      // Counted as the engine produced it, even if the call is ending.
      if (state->metrics != nullptr) {
        state->metrics->OnEvent(state->timeline, event, absl::Now());
      }
      // The call already ended or is ending (cancelled): nobody will read.
      if (state->reactor == nullptr || state->finish_started ||
          state->finish_status.has_value()) {
        return;
      }
      state->pending.push_back(std::move(event));
    }
    Pump(state);
  };
}

void GenerateStream::Fail(grpc::Status status) {
  {
    absl::MutexLock lock(&state_->mu);
    if (!state_->finish_status.has_value()) {
      state_->finish_status = std::move(status);
    }
  }
  Pump(state_);
}

// Takes `state` by value: a Finish below may let OnDone delete the reactor
// that owns the caller's reference.
void GenerateStream::Pump(std::shared_ptr<State> state) {
  enum class Op { kWrite, kWriteAndFinish, kFinish };
  Op op;
  grpc::Status status;
  GenerateStream* reactor;
  {
    absl::MutexLock lock(&state->mu);
    if (state->reactor == nullptr || state->write_in_flight ||
        state->finish_started) {
      return;
    }
    if (!state->pending.empty() && !state->finish_status.has_value()) {
      // One message holds one sequence's events: those of the sequence
      // that waited longest; the others' stay for the next writes.
      const int32_t index = state->pending.front().index;
      std::vector<GenerationEvent> run, rest;
      for (GenerationEvent& e : state->pending) {
        (e.index == index ? run : rest).push_back(std::move(e));
      }
      state->pending = std::move(rest);
      CoalescedEvents batch = CoalesceEvents(std::move(run), state->request_id);
      state->out = std::move(batch.response);
      state->out.set_index(static_cast<uint32_t>(std::max(index, 0)));
      if (batch.ended && batch.error.ok()) {
        state->finish_reason = state->out.finish_reason();
        state->generated_tokens += state->out.usage().generated_tokens();
      }
      if (!batch.ended) {
        op = Op::kWrite;
      } else if (batch.error.ok()) {
        // The last sequence's last message: one operation carries its
        // tokens, usage and the OK status.
        op = ++state->written_finals >= state->n ? Op::kWriteAndFinish
                                                 : Op::kWrite;
      } else {
        // A non-OK finish drops a message sent with it, so tokens produced
        // before the error go out first.
        state->finish_status = ToGrpcStatus(batch.error);
        if (!batch.has_content) {
          op = Op::kFinish;
          status = *state->finish_status;
        } else {
          op = Op::kWrite;
        }
      }
    } else if (state->finish_status.has_value()) {
      op = Op::kFinish;
      status = *state->finish_status;
    } else {
      return;
    }
    if (op == Op::kWrite) {
      state->write_in_flight = true;
    } else {
      state->finish_started = true;
    }
    if (op != Op::kFinish) ++state->messages;
    reactor = state->reactor;
  }
  // gRPC calls happen outside the lock: a reaction may run inline and take it.
  // The reactor cannot be deleted meanwhile, since OnDone needs the write or
  // finish started here to complete first.
  if (op != Op::kFinish) state->out_bytes = SerializeToByteBuffer(state->out);
  switch (op) {
    case Op::kWrite:
      reactor->StartWrite(&state->out_bytes);
      break;
    case Op::kWriteAndFinish:
      reactor->StartWriteAndFinish(&state->out_bytes, grpc::WriteOptions(),
                                   grpc::Status::OK);
      break;
    case Op::kFinish:
      reactor->Finish(std::move(status));
      break;
  }
}

void GenerateStream::OnWriteDone(bool ok) {
  {
    absl::MutexLock lock(&state_->mu);
    state_->write_in_flight = false;
    if (!ok) {
      // The stream broke (client gone): stop generating for it.
      state_->control->cancelled.store(true);
      state_->pending.clear();
      if (!state_->finish_status.has_value()) {
        state_->finish_status =
            grpc::Status(grpc::StatusCode::CANCELLED, "client went away");
      }
    }
  }
  Pump(state_);
}

void GenerateStream::OnCancel() {
  state_->control->cancelled.store(true);
  {
    absl::MutexLock lock(&state_->mu);
    state_->pending.clear();
    if (!state_->finish_status.has_value()) {
      state_->finish_status =
          grpc::Status(grpc::StatusCode::CANCELLED, "call cancelled");
    }
  }
  Pump(state_);
}

void GenerateStream::OnDone() {
  {
    absl::MutexLock lock(&state_->mu);
    state_->reactor = nullptr;
    state_->pending.clear();
    spdlog::debug(
        "request {} done: finish={} generated={} events={} messages={} "
        "status={} in {:.1f} ms",
        state_->request_id.empty() ? "(unnamed)" : state_->request_id,
        v1::FinishReason_Name(state_->finish_reason), state_->generated_tokens,
        state_->events, state_->messages,
        state_->finish_status.has_value()
            ? std::to_string(state_->finish_status->error_code())
            : "0",
        absl::ToDoubleMilliseconds(absl::Now() - state_->start));
    if (state_->metrics != nullptr) {
      state_->metrics->OnCallDone(Frontend::kGrpc,
                                  state_->finish_status.has_value()
                                      ? state_->finish_status->error_code()
                                      : grpc::StatusCode::OK);
    }
  }
  if (on_done_) on_done_();
  delete this;
}

}  // namespace seqboat
