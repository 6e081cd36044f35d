// The server side of one streaming Generate call.
//
// The engine delivers events through sink() on its own thread and must never
// block, so events are only appended to a pending buffer; at most one gRPC
// write is in flight, and when it completes everything that piled up is sent
// as one coalesced message (one per sequence of a request of n, in turn; the
// call ends after the last sequence's last message). Client cancellation (and
// deadline expiry, which gRPC reports as a cancellation) sets the request's
// control->cancelled so the engine frees the slot at its next step.
//
// Lifetime: gRPC owns the reactor until OnDone, where it deletes itself. The
// buffer lives in shared state that the sink closure also holds, so the
// engine may call the sink (or drop it) after the call is long gone.
#ifndef SEQBOAT_SERVER_GENERATE_STREAM_H_
#define SEQBOAT_SERVER_GENERATE_STREAM_H_

#include <grpcpp/grpcpp.h>

#include <functional>
#include <memory>
#include <string>

#include "engine/request.h"
#include "seqboat/v1/generate.grpc.pb.h"
#include "server/serving_metrics.h"

namespace seqboat {

// A message's wire bytes, for raw (ByteBuffer) methods.
grpc::ByteBuffer SerializeToByteBuffer(
    const google::protobuf::Message& message);

// Parses a raw method's request; false when the bytes are not a valid
// message (a malformed field, a string that is not UTF-8).
bool ParseFromByteBuffer(const grpc::ByteBuffer& bytes,
                         google::protobuf::Message* message);

// Writes GenerateResponse messages serialized by hand: the service takes
// Generate as a raw method so that a request that does not parse is answered
// INVALID_ARGUMENT by the service, not UNIMPLEMENTED by gRPC.
class GenerateStream final : public grpc::ServerWriteReactor<grpc::ByteBuffer> {
 public:
  // `request_id` is echoed in every message; `control` is the request's.
  // `on_done`, if set, runs once the call is over (from OnDone). `metrics`,
  // if set, sees every engine event and the call's end; it must outlive the
  // engine's last event.
  GenerateStream(std::string request_id,
                 std::shared_ptr<RequestControl> control,
                 std::function<void()> on_done = nullptr,
                 ServingMetrics* metrics = nullptr);

  // The sink to put in the engine Request of `n` sequences, of `tenant`
  // (its key's; "" without keys) in the metrics. Thread-safe, never blocks,
  // and may be called or destroyed at any time, including after the call
  // ended.
  EventSink sink(int32_t n = 1, std::string tenant = "");

  // Ends the call with `status`; for requests the engine never accepted.
  void Fail(grpc::Status status);

  void OnWriteDone(bool ok) override;
  void OnCancel() override;
  void OnDone() override;

 private:
  struct State;
  ~GenerateStream() override = default;

  // Starts the next write or the finish if the state allows one now.
  static void Pump(std::shared_ptr<State> state);

  const std::shared_ptr<State> state_;
  std::function<void()> on_done_;
};

}  // namespace seqboat

#endif  // SEQBOAT_SERVER_GENERATE_STREAM_H_
