#include "server/response_coalescer.h"

#include <algorithm>
#include <utility>

namespace seqboat {

v1::FinishReason ToProtoFinishReason(FinishReason reason) {
  switch (reason) {
    case FinishReason::kNone:
      return v1::FINISH_REASON_UNSPECIFIED;
    case FinishReason::kLength:
      return v1::FINISH_REASON_LENGTH;
    case FinishReason::kStopString:
      return v1::FINISH_REASON_STOP_STRING;
    case FinishReason::kEos:
      return v1::FINISH_REASON_EOS;
    case FinishReason::kCancelled:
      return v1::FINISH_REASON_CANCELLED;
  }
  return v1::FINISH_REASON_UNSPECIFIED;
}

std::vector<SequenceEvents> SplitBySequence(
    std::vector<GenerationEvent> events) {
  std::vector<SequenceEvents> out;
  for (GenerationEvent& e : events) {
    auto it = std::find_if(
        out.begin(), out.end(),
        [&](const SequenceEvents& s) { return s.index == e.index; });
    if (it == out.end())
      it = out.insert(out.end(), SequenceEvents{e.index, {}});
    it->events.push_back(std::move(e));
  }
  return out;
}

CoalescedEvents CoalesceEvents(std::vector<GenerationEvent> events,
                               const std::string& request_id) {
  CoalescedEvents out;
  v1::GenerateResponse& response = out.response;
  response.set_request_id(request_id);
  for (GenerationEvent& event : events) {
    if (!event.status.ok()) {
      out.ended = true;
      out.error = std::move(event.status);
      break;
    }
    response.mutable_token_ids()->Add(event.token_ids.begin(),
                                      event.token_ids.end());
    response.mutable_text()->append(event.text);
    for (const TokenLogprobs& lp : event.logprobs) {
      v1::TokenLogprobs* proto = response.add_logprobs();
      proto->mutable_chosen()->set_token_id(lp.chosen.token_id);
      proto->mutable_chosen()->set_logprob(lp.chosen.logprob);
      for (const TokenLogprob& alt : lp.top) {
        v1::TokenLogprob* top = proto->add_top();
        top->set_token_id(alt.token_id);
        top->set_logprob(alt.logprob);
      }
    }
    if (event.finish != FinishReason::kNone) {
      out.ended = true;
      response.set_finish_reason(ToProtoFinishReason(event.finish));
      response.mutable_usage()->set_prompt_tokens(
          static_cast<uint32_t>(std::max(event.prompt_tokens, 0)));
      response.mutable_usage()->set_cached_prompt_tokens(
          static_cast<uint32_t>(std::max(event.cached_prompt_tokens, 0)));
      response.mutable_usage()->set_generated_tokens(
          static_cast<uint32_t>(std::max(event.generated_tokens, 0)));
      response.set_matched_stop(std::move(event.matched_stop));
      break;
    }
  }
  out.has_content = response.token_ids_size() > 0 || !response.text().empty() ||
                    response.logprobs_size() > 0 ||
                    (out.ended && out.error.ok());
  return out;
}

}  // namespace seqboat
