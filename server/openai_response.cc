#include "server/openai_response.h"

#include <algorithm>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <utility>

#include "absl/strings/str_cat.h"
#include "engine/tokenizer/utf8.h"
#include "server/openai_error.h"
#include "server/openai_json.h"
#include "server/response_coalescer.h"

namespace seqboat {
namespace {

using ojson = nlohmann::ordered_json;

// OpenAI's finish_reason for a response's; "" for none.
std::string FinishName(v1::FinishReason reason) {
  switch (reason) {
    case v1::FINISH_REASON_LENGTH:
      return "length";
    case v1::FINISH_REASON_STOP_STRING:
    case v1::FINISH_REASON_EOS:
      return "stop";
    default:
      return "";
  }
}

}  // namespace

std::string OpenAiFinishReason(FinishReason reason) {
  switch (reason) {
    case FinishReason::kLength:
      return "length";
    case FinishReason::kStopString:
    case FinishReason::kEos:
      return "stop";
    case FinishReason::kCancelled:
    case FinishReason::kNone:
      break;
  }
  return "";
}

std::string TokenText(const std::string& bytes) {
  if (Utf8Lossy(bytes) == bytes) return bytes;
  std::string out = "bytes:";
  static constexpr char kHex[] = "0123456789abcdef";
  for (unsigned char c : bytes) {
    out += "\\x";
    out += kHex[c >> 4];
    out += kHex[c & 15];
  }
  return out;
}

CompletionRenderer::CompletionRenderer(CompletionContext context)
    : ChoicesRenderer(std::move(context), "text_completion",
                      "text_completion") {}

namespace {

// The characters a token's bytes begin in the completion text: its lead
// bytes (non-continuation bytes) are what a str's length counts.
int64_t CharactersIn(const std::string& bytes) {
  int64_t n = 0;
  for (unsigned char c : bytes) n += (c & 0xC0) != 0x80;
  return n;
}

ojson Usage(const v1::Usage& usage) {
  ojson out;
  out["prompt_tokens"] = usage.prompt_tokens();
  out["completion_tokens"] = usage.generated_tokens();
  out["total_tokens"] =
      static_cast<uint64_t>(usage.prompt_tokens()) + usage.generated_tokens();
  ojson details;
  details["cached_tokens"] = usage.cached_prompt_tokens();
  out["prompt_tokens_details"] = std::move(details);
  return out;
}

// The final event that ended a request without error but without a normal
// finish (the server cancelled it while draining) reads as this error.
absl::Status CancelledByServer() {
  return absl::UnavailableError(
      "the request was cancelled: the server is shutting down");
}

}  // namespace

ojson CompletionRenderer::Choice(const v1::GenerateResponse& run, int32_t index,
                                 bool final_chunk) {
  ojson choice;
  choice["index"] = index;
  if (text_offset_.size() <= static_cast<size_t>(index)) {
    text_offset_.resize(static_cast<size_t>(index) + 1, 0);
  }
  int64_t& text_offset = text_offset_[static_cast<size_t>(index)];
  choice["text"] = run.text();
  if (context_.logprobs) {
    ojson tokens = ojson::array(), token_logprobs = ojson::array(),
          top_logprobs = ojson::array(), offsets = ojson::array();
    for (int i = 0; i < run.logprobs_size(); ++i) {
      const v1::TokenLogprobs& lp = run.logprobs(i);
      const std::string bytes =
          context_.token_bytes ? context_.token_bytes(lp.chosen().token_id())
                               : std::string();
      const std::string text = TokenText(bytes);
      tokens.push_back(text);
      token_logprobs.push_back(lp.chosen().logprob());
      // The chosen token and up to N alternatives, as OpenAI returns them.
      ojson top = ojson::object();
      top[text] = lp.chosen().logprob();
      for (const v1::TokenLogprob& alt : lp.top()) {
        const std::string alt_text = TokenText(
            context_.token_bytes ? context_.token_bytes(alt.token_id())
                                 : std::string());
        if (!top.contains(alt_text)) top[alt_text] = alt.logprob();
      }
      top_logprobs.push_back(std::move(top));
      offsets.push_back(text_offset);
      text_offset += CharactersIn(bytes);
    }
    ojson logprobs;
    logprobs["tokens"] = std::move(tokens);
    logprobs["token_logprobs"] = std::move(token_logprobs);
    logprobs["top_logprobs"] = std::move(top_logprobs);
    logprobs["text_offset"] = std::move(offsets);
    choice["logprobs"] = std::move(logprobs);
  } else {
    choice["logprobs"] = nullptr;
  }
  choice["finish_reason"] = nullptr;
  if (final_chunk) {
    choice["finish_reason"] = NullIfEmpty(FinishName(run.finish_reason()));
    // vLLM's extension: which stop string ended it.
    choice["stop_reason"] = NullIfEmpty(run.matched_stop());
  }
  return choice;
}

namespace {

// Adds a choice's usage to the request's: the prompt was read once for all
// choices, their completions add up.
void AddUsage(const v1::Usage& choice, v1::Usage* total) {
  total->set_prompt_tokens(choice.prompt_tokens());
  total->set_cached_prompt_tokens(choice.cached_prompt_tokens());
  total->set_generated_tokens(total->generated_tokens() +
                              choice.generated_tokens());
}

// Whether an event ends its request: an error, or the last of the n
// choices' final events (*finals counts them).
bool EndsRequest(const GenerationEvent& event, int32_t n, int32_t* finals) {
  if (!event.status.ok()) return true;
  return event.finish != FinishReason::kNone && ++*finals >= n;
}

// The first error among a request's events, or OK.
absl::Status FirstError(const std::vector<SequenceEvents>& sequences) {
  for (const SequenceEvents& sequence : sequences) {
    for (const GenerationEvent& e : sequence.events) {
      if (!e.status.ok()) return e.status;
    }
  }
  return absl::OkStatus();
}

}  // namespace

ChoicesRenderer::ChoicesRenderer(CompletionContext context,
                                 const char* chunk_object,
                                 const char* body_object)
    : context_(std::move(context)),
      chunk_object_(chunk_object),
      body_object_(body_object) {}

ojson ChoicesRenderer::Header(const char* object) const {
  ojson header;
  header["id"] = context_.id;
  header["object"] = object;
  header["created"] = context_.created;
  header["model"] = context_.model;
  return header;
}

std::string ChoicesRenderer::ChunkEvent(ojson choice) const {
  ojson chunk = Header(chunk_object_);
  chunk["choices"] = ojson::array({std::move(choice)});
  if (context_.include_usage) chunk["usage"] = nullptr;
  return absl::StrCat("data: ", Dump(chunk), "\n\n");
}

std::string ChoicesRenderer::StreamEvents(std::vector<GenerationEvent> events) {
  if (ended_ || events.empty()) return "";
  std::string out;
  absl::Status error;
  for (SequenceEvents& sequence : SplitBySequence(std::move(events))) {
    CoalescedEvents run =
        CoalesceEvents(std::move(sequence.events), context_.id);
    error = run.error;
    if (error.ok() && run.ended &&
        run.response.finish_reason() == v1::FINISH_REASON_CANCELLED) {
      error = CancelledByServer();
    }
    const bool finished_ok = run.ended && error.ok();
    const bool has_output = !run.response.text().empty() ||
                            (context_.logprobs && run.response.logprobs_size());
    if (has_output || finished_ok) {
      for (ojson& choice :
           StreamChoice(run.response, sequence.index, finished_ok)) {
        absl::StrAppend(&out, ChunkEvent(std::move(choice)));
      }
    }
    if (!error.ok()) break;
    if (finished_ok) {
      AddUsage(run.response.usage(), &usage_);
      ++finals_;
    }
  }
  if (error.ok() && finals_ < context_.n) return out;
  ended_ = true;
  if (!error.ok()) {
    final_code_ = error.code();
    absl::StrAppend(&out, "data: ", ErrorBody(ErrorFromStatus(error)), "\n\n");
  } else if (context_.include_usage) {
    ojson chunk = Header(chunk_object_);
    chunk["choices"] = ojson::array();
    chunk["usage"] = Usage(usage_);
    absl::StrAppend(&out, "data: ", Dump(chunk), "\n\n");
  }
  absl::StrAppend(&out, "data: [DONE]\n\n");
  return out;
}

void ChoicesRenderer::Add(GenerationEvent event) {
  if (ended_) return;
  ended_ = EndsRequest(event, context_.n, &finals_);
  pending_.push_back(std::move(event));
}

std::pair<int, std::string> ChoicesRenderer::Finish() {
  std::vector<SequenceEvents> sequences = SplitBySequence(std::move(pending_));
  pending_.clear();
  // Choices in index order.
  std::sort(sequences.begin(), sequences.end(),
            [](const SequenceEvents& a, const SequenceEvents& b) {
              return a.index < b.index;
            });
  ojson choices = ojson::array();
  // An error in any sequence is the answer.
  absl::Status error = FirstError(sequences);
  for (SequenceEvents& sequence : sequences) {
    if (!error.ok()) break;
    CoalescedEvents run =
        CoalesceEvents(std::move(sequence.events), context_.id);
    error = run.error;
    if (!run.ended) {
      error = absl::InternalError("the request ended without a final event");
    } else if (error.ok() &&
               run.response.finish_reason() == v1::FINISH_REASON_CANCELLED) {
      error = CancelledByServer();
    }
    if (!error.ok()) break;
    AddUsage(run.response.usage(), &usage_);
    choices.push_back(BodyChoice(run.response, sequence.index));
  }
  if (error.ok() && static_cast<int32_t>(choices.size()) < context_.n) {
    error = absl::InternalError("the request ended without a final event");
  }
  if (!error.ok()) {
    final_code_ = error.code();
    OpenAiError e = ErrorFromStatus(error);
    return {e.http_status, ErrorBody(e)};
  }
  ojson body = Header(body_object_);
  body["choices"] = std::move(choices);
  body["usage"] = Usage(usage_);
  return {200, Dump(body)};
}

std::vector<ojson> CompletionRenderer::StreamChoice(
    const v1::GenerateResponse& run, int32_t index, bool final_chunk) {
  return {Choice(run, index, final_chunk)};
}

ojson CompletionRenderer::BodyChoice(const v1::GenerateResponse& run,
                                     int32_t index) {
  return Choice(run, index, true);
}

namespace {

ojson Model(const std::string& model_id, int64_t created) {
  ojson model;
  model["id"] = model_id;
  model["object"] = "model";
  model["created"] = created;
  model["owned_by"] = "seqboat";
  return model;
}

}  // namespace

std::string ModelBody(const std::string& model_id, int64_t created) {
  return Dump(Model(model_id, created));
}

std::string ModelListBody(const std::string& model_id, int64_t created) {
  ojson list;
  list["object"] = "list";
  list["data"] = ojson::array({Model(model_id, created)});
  return Dump(list);
}

ChatRenderer::ChatRenderer(CompletionContext context, ToolCallOptions tools)
    : ChoicesRenderer(std::move(context), "chat.completion.chunk",
                      "chat.completion"),
      tools_(std::move(tools)) {}

ChoiceToolCalls& ChatRenderer::Calls(int32_t index) {
  if (calls_.size() <= static_cast<size_t>(index)) {
    calls_.resize(static_cast<size_t>(index) + 1);
  }
  std::unique_ptr<ChoiceToolCalls>& calls = calls_[static_cast<size_t>(index)];
  if (calls == nullptr) {
    calls = std::make_unique<ChoiceToolCalls>(tools_, [this] {
      // OpenAI's ids: "call_" and 24 letters and digits.
      static constexpr char kChars[] =
          "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789";
      std::string id = "call_";
      for (int i = 0; i < 24; ++i) {
        id += kChars[absl::Uniform<size_t>(rng_, 0, sizeof(kChars) - 1)];
      }
      return id;
    });
  }
  return *calls;
}

ojson ChatRenderer::ChatFinishReason(const v1::GenerateResponse& run,
                                     int32_t index) {
  const std::string reason = FinishName(run.finish_reason());
  if (reason == "stop" && Calls(index).called()) return "tool_calls";
  return NullIfEmpty(reason);
}

ojson ChatRenderer::Logprobs(const v1::GenerateResponse& run) const {
  const auto entry = [this](int32_t id, float logprob) {
    const std::string bytes =
        context_.token_bytes ? context_.token_bytes(id) : std::string();
    ojson item;
    item["token"] = TokenText(bytes);
    item["logprob"] = logprob;
    ojson raw = ojson::array();
    for (unsigned char c : bytes) raw.push_back(static_cast<int>(c));
    item["bytes"] = std::move(raw);
    return item;
  };
  ojson content = ojson::array();
  for (const v1::TokenLogprobs& lp : run.logprobs()) {
    ojson item = entry(lp.chosen().token_id(), lp.chosen().logprob());
    ojson top = ojson::array();
    for (const v1::TokenLogprob& alt : lp.top()) {
      top.push_back(entry(alt.token_id(), alt.logprob()));
    }
    item["top_logprobs"] = std::move(top);
    content.push_back(std::move(item));
  }
  ojson logprobs;
  logprobs["content"] = std::move(content);
  logprobs["refusal"] = nullptr;
  return logprobs;
}

std::vector<ojson> ChatRenderer::StreamChoice(const v1::GenerateResponse& run,
                                              int32_t index, bool final_chunk) {
  ChoiceToolCalls& calls = Calls(index);
  ojson tool_deltas = ojson::array();
  std::string content = calls.Feed(run.text(), &tool_deltas);
  if (final_chunk) content += calls.Finish(&tool_deltas);
  const bool logprobs = context_.logprobs && run.logprobs_size() > 0;
  std::vector<ojson> choices;
  const auto add = [&](ojson delta, bool last) {
    ojson choice;
    choice["index"] = index;
    choice["delta"] = std::move(delta);
    choice["logprobs"] = nullptr;
    if (logprobs && choices.empty()) choice["logprobs"] = Logprobs(run);
    choice["finish_reason"] = nullptr;
    if (last) {
      choice["finish_reason"] = ChatFinishReason(run, index);
      choice["stop_reason"] = NullIfEmpty(run.matched_stop());
    }
    choices.push_back(std::move(choice));
  };
  if (!content.empty() || (logprobs && tool_deltas.empty())) {
    ojson delta = ojson::object();
    if (!content.empty()) delta["content"] = std::move(content);
    add(std::move(delta), final_chunk && tool_deltas.empty());
  }
  // Each call entry a chunk of its own, as OpenAI streams them.
  for (size_t i = 0; i < tool_deltas.size(); ++i) {
    ojson delta;
    delta["tool_calls"] = ojson::array({std::move(tool_deltas[i])});
    add(std::move(delta), final_chunk && i + 1 == tool_deltas.size());
  }
  if (final_chunk && choices.empty()) add(ojson::object(), true);
  return choices;
}

std::string ChatRenderer::StreamStart() {
  std::string out;
  for (int32_t index = 0; index < std::max(context_.n, 1); ++index) {
    ojson delta;
    delta["role"] = "assistant";
    delta["content"] = "";
    ojson choice;
    choice["index"] = index;
    choice["delta"] = std::move(delta);
    choice["logprobs"] = nullptr;
    choice["finish_reason"] = nullptr;
    absl::StrAppend(&out, ChunkEvent(std::move(choice)));
  }
  return out;
}

ojson ChatRenderer::BodyChoice(const v1::GenerateResponse& run, int32_t index) {
  ojson message;
  message["role"] = "assistant";
  Calls(index).Message(run.text(), &message);
  ojson choice;
  choice["index"] = index;
  choice["message"] = std::move(message);
  choice["logprobs"] = nullptr;
  if (context_.logprobs) choice["logprobs"] = Logprobs(run);
  choice["finish_reason"] = ChatFinishReason(run, index);
  choice["stop_reason"] = NullIfEmpty(run.matched_stop());
  return choice;
}

}  // namespace seqboat
