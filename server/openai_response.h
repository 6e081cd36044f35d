// The OpenAI completions and chat completions APIs' responses, rendered
// from seqboat's engine events: completion objects and chat.completion
// objects, their streamed chunks as server-sent events, usage, logprobs in
// each API's form, errors as OpenAI's error object; and the /v1/models
// list. Pure: no I/O, no engine.
#ifndef SEQBOAT_SERVER_OPENAI_RESPONSE_H_
#define SEQBOAT_SERVER_OPENAI_RESPONSE_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <utility>
#include <vector>

#include "absl/random/random.h"
#include "absl/status/status.h"
#include "engine/request.h"
#include "seqboat/v1/generate.pb.h"
#include "server/openai_tool_calls.h"

namespace seqboat {

// What is fixed for one completion's responses.
struct CompletionContext {
  std::string id;       // "cmpl-..."
  int64_t created = 0;  // Unix seconds
  std::string model;
  bool logprobs = false;       // the request asked for logprobs
  bool include_usage = false;  // streaming: a usage chunk before [DONE]
  int32_t n = 1;               // choices: the request's sequences
  // The text of a token for logprobs: valid UTF-8 as is, otherwise
  // "bytes:\xNN..." as OpenAI writes partial characters.
  std::function<std::string(int32_t)> token_bytes;
};

// What both endpoints' renderers share: events split by choice and fed in
// runs (whatever piled up since the last call, as GenerateStream coalesces
// them, so a slow reader gets fewer, larger chunks), the end once every
// choice's final event (or an error) arrived, errors as OpenAI's error
// object, and the usage counting the prompt once and the completion tokens
// of every choice. Subclasses render one choice in their endpoint's form.
class ChoicesRenderer {
 public:
  virtual ~ChoicesRenderer() = default;

  // SSE bytes for a run of events: for each choice the run carries text,
  // logprobs or the finish of, one "data: {chunk}\n\n" (its choices hold
  // that one, with its index); once every choice finished, the usage chunk
  // (when asked for) and "data: [DONE]\n\n". An error ends the stream with
  // "data: {\"error\": ...}\n\n" and [DONE]. After the end, returns "".
  std::string StreamEvents(std::vector<GenerationEvent> events);

  // Non-streaming: remembers the events; once every choice's final one (or
  // an error) arrived, Finish() gives the HTTP status and body (the
  // completion object, or the error object when the request failed).
  void Add(GenerationEvent event);
  bool ended() const { return ended_; }
  std::pair<int, std::string> Finish();

  // The gRPC status code the call ends with, for the metrics: OK, or the
  // error's.
  absl::StatusCode final_code() const { return final_code_; }

 protected:
  // `chunk_object` names the streamed chunks, `body_object` the
  // non-streaming body.
  ChoicesRenderer(CompletionContext context, const char* chunk_object,
                  const char* body_object);

  // The object's id, object, created and model.
  nlohmann::ordered_json Header(const char* object) const;
  // The streamed chunks' choices for a run of a choice's tokens (none when
  // the run decided nothing yet), the last with the finish reason when
  // `final_chunk`.
  virtual std::vector<nlohmann::ordered_json> StreamChoice(
      const v1::GenerateResponse& run, int32_t index, bool final_chunk) = 0;
  // A finished choice in the non-streaming body.
  virtual nlohmann::ordered_json BodyChoice(const v1::GenerateResponse& run,
                                            int32_t index) = 0;
  // A streamed chunk holding one choice.
  std::string ChunkEvent(nlohmann::ordered_json choice) const;

  const CompletionContext context_;

 private:
  const char* const chunk_object_;
  const char* const body_object_;
  int32_t finals_ = 0;  // choices finished without error
  v1::Usage usage_;     // the prompt once, every choice's completion
  bool ended_ = false;
  absl::StatusCode final_code_ = absl::StatusCode::kOk;
  std::vector<GenerationEvent> pending_;
};

// Renders a request's events as OpenAI text_completion objects, one choice
// per sequence (its index), logprobs in the completions API's form.
class CompletionRenderer : public ChoicesRenderer {
 public:
  explicit CompletionRenderer(CompletionContext context);

 private:
  std::vector<nlohmann::ordered_json> StreamChoice(
      const v1::GenerateResponse& run, int32_t index,
      bool final_chunk) override;
  nlohmann::ordered_json BodyChoice(const v1::GenerateResponse& run,
                                    int32_t index) override;
  // The choice `index` for one run of its tokens (advancing its logprobs'
  // text offset); with the finish reason when `final_chunk`.
  nlohmann::ordered_json Choice(const v1::GenerateResponse& run, int32_t index,
                                bool final_chunk);

  // Per choice: characters of completion before its next token.
  std::vector<int64_t> text_offset_;
};

// OpenAI's finish_reason: "stop" (a stop string, EOS or a stop token id) or
// "length"; "" for none.
std::string OpenAiFinishReason(FinishReason reason);

// Byte strings that are not valid UTF-8 as "bytes:\xNN..." (OpenAI's form
// for a token that holds part of a character); valid ones unchanged.
std::string TokenText(const std::string& bytes);

// The /v1/models list and one model object.
std::string ModelListBody(const std::string& model_id, int64_t created);
std::string ModelBody(const std::string& model_id, int64_t created);

// Renders a chat request's events as OpenAI's chat.completion object, or
// as chat.completion.chunk events: the first of each choice (StreamStart)
// carries delta.role, the others delta.content, logprobs in chat's form
// (logprobs.content[] of token, logprob, bytes and top_logprobs), the last
// the finish_reason; then, once every choice finished, the usage chunk
// when asked for, and "data: [DONE]". A chunk holds one choice, with its
// index. With tools, each choice's output is read for tool calls
// (openai_tool_calls.h): message.tool_calls, delta.tool_calls, and
// finish_reason "tool_calls" when it held any.
class ChatRenderer : public ChoicesRenderer {
 public:
  explicit ChatRenderer(CompletionContext context,
                        ToolCallOptions tools = ToolCallOptions());

  // The stream's first chunks, one per choice, before any token.
  std::string StreamStart();

 private:
  std::vector<nlohmann::ordered_json> StreamChoice(
      const v1::GenerateResponse& run, int32_t index,
      bool final_chunk) override;
  nlohmann::ordered_json BodyChoice(const v1::GenerateResponse& run,
                                    int32_t index) override;
  nlohmann::ordered_json Logprobs(const v1::GenerateResponse& run) const;
  // Choice `index`'s reader, made on first use.
  ChoiceToolCalls& Calls(int32_t index);
  // finish_reason, "tool_calls" when the choice called tools.
  nlohmann::ordered_json ChatFinishReason(const v1::GenerateResponse& run,
                                          int32_t index);

  const ToolCallOptions tools_;
  std::vector<std::unique_ptr<ChoiceToolCalls>> calls_;
  absl::BitGen rng_;  // call ids
};

}  // namespace seqboat

#endif  // SEQBOAT_SERVER_OPENAI_RESPONSE_H_
