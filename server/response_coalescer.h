// Folds a run of engine events into one GenerateResponse, so that a client
// that reads slower than the engine produces gets fewer, larger messages
// instead of an ever-growing backlog.
#ifndef SEQBOAT_SERVER_RESPONSE_COALESCER_H_
#define SEQBOAT_SERVER_RESPONSE_COALESCER_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "engine/request.h"
#include "seqboat/v1/generate.pb.h"

namespace seqboat {

struct CoalescedEvents {
  v1::GenerateResponse response;
  // True when the response carries anything for the client (tokens, text,
  // logprobs or the final finish_reason/usage).
  bool has_content = false;
  // True when the events included the request's last one.
  bool ended = false;
  // Non-OK when the request ended with an error; response then holds only
  // the output produced before it.
  absl::Status error;
};

// Concatenates token ids, text and logprobs of `events` in order. A final
// event (finish != kNone) adds finish_reason, usage and matched_stop; an
// error event ends the run. Events after the last one are ignored.
CoalescedEvents CoalesceEvents(std::vector<GenerationEvent> events,
                               const std::string& request_id);

v1::FinishReason ToProtoFinishReason(FinishReason reason);

// A request of n sequences: its events split by sequence index, in the order
// each index first appears, each sequence's events in their order.
struct SequenceEvents {
  int32_t index = 0;
  std::vector<GenerationEvent> events;
};
std::vector<SequenceEvents> SplitBySequence(
    std::vector<GenerationEvent> events);

}  // namespace seqboat

#endif  // SEQBOAT_SERVER_RESPONSE_COALESCER_H_
