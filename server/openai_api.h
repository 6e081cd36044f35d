// The OpenAI completions and chat completions APIs' JSON, mapped onto
// seqboat's own request and events: a /v1/completions body becomes a
// v1::GenerateRequest (which request_validation then checks, as for gRPC),
// and so does a /v1/chat/completions body once the model's chat template
// has rendered its messages; engine events become completion objects and
// SSE chunks, and statuses become OpenAI's error object with its HTTP
// status. No I/O and no engine here, so every mapping
// is testable on its own; server/openai_server serves it.
#ifndef SEQBOAT_SERVER_OPENAI_API_H_
#define SEQBOAT_SERVER_OPENAI_API_H_

#include <cstdint>
#include <functional>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "engine/request.h"
#include "seqboat/v1/generate.pb.h"
#include "server/chat_template.h"
#include "server/request_validation.h"

namespace seqboat {

// OpenAI's error object and the HTTP status it goes with.
struct OpenAiError {
  int http_status = 400;
  std::string message;
  std::string type = "invalid_request_error";
  std::string param;  // "" is rendered as null
  std::string code;   // "" is rendered as null
};

// {"error": {"message": ..., "type": ..., "param": ..., "code": ...}}
std::string ErrorBody(const OpenAiError& error);

// A status from validation or the engine as OpenAI's error: INVALID_ARGUMENT
// is 400 with the field renamed to the OpenAI parameter it came from
// ("stopping.max_new_tokens must be ..." becomes "max_tokens must be ...",
// param "max_tokens"), RESOURCE_EXHAUSTED (queue full) 429, UNAVAILABLE
// (draining, device lost) 503, NOT_FOUND 404, anything else 500.
OpenAiError ErrorFromStatus(const absl::Status& status);

// The status code of the same meaning as an HTTP status (400 is
// INVALID_ARGUMENT, 429 RESOURCE_EXHAUSTED...), for the metrics both front
// ends share.
absl::StatusCode StatusCodeForHttpStatus(int http_status);

// What one POST /v1/completions asks for.
struct CompletionRequest {
  // The prompt and every engine parameter, for RequestFromProto.
  v1::GenerateRequest generate;
  bool stream = false;
  bool include_usage = false;  // stream_options.include_usage
};

// Parses a /v1/completions body: JSON syntax, the type of every field, the
// model name (absent, or `model_id`), and the parameters the engine has no
// equivalent for (best_of other than n, echo, suffix, logit_bias: refused
// naming the parameter). Unknown fields
// are refused, as OpenAI does. Ranges are left to RequestFromProto, except
// where the JSON value cannot be represented in the proto's field (a
// negative max_tokens), which `limits` words as validation would. On failure
// returns false and fills *error.
bool ParseCompletionRequest(std::string_view body, const std::string& model_id,
                            const ValidationLimits& limits,
                            CompletionRequest* out, OpenAiError* error);

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
  // One streamed chunk's choice for a run of its tokens; with the finish
  // reason when `final_chunk`.
  virtual nlohmann::ordered_json StreamChoice(const v1::GenerateResponse& run,
                                              int32_t index,
                                              bool final_chunk) = 0;
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
  nlohmann::ordered_json StreamChoice(const v1::GenerateResponse& run,
                                      int32_t index, bool final_chunk) override;
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

// --- /v1/chat/completions

// The most messages one chat request may hold.
inline constexpr int kMaxChatMessages = 1024;

// What one POST /v1/chat/completions asks for.
struct ChatRequest {
  // Roles are "system", "user" or "assistant" ("developer" arrives as
  // "system"); content is text (a list of text parts joined by "\n").
  std::vector<ChatMessage> messages;
  // Every engine parameter, stream and include_usage, as a completions
  // request holds them; the prompt is left to the caller (the rendered
  // template).
  CompletionRequest completion;
  // Chat's logprobs (a boolean); top_logprobs is completion's top_n.
  bool logprobs = false;
  // How the client named the token limit: "max_tokens" or
  // "max_completion_tokens".
  std::string max_tokens_param = "max_tokens";
};

// Parses a /v1/chat/completions body: the messages (roles, content as a
// string or text parts, name), max_tokens or max_completion_tokens,
// logprobs and top_logprobs, and every parameter completions take, checked
// as ParseCompletionRequest checks them. Refuses, naming the parameter:
// unknown fields, no messages or more than kMaxChatMessages, an unknown
// role, missing content, parts that are not text, tool calls and tools, a
// response_format other than text. On failure returns false and fills
// *error.
bool ParseChatRequest(std::string_view body, const std::string& model_id,
                      const ValidationLimits& limits, ChatRequest* out,
                      OpenAiError* error);

// An error about the fields of request.completion as the chat request
// names them: prompt is messages, logprobs is top_logprobs, max_tokens is
// the parameter the client used.
OpenAiError ChatError(OpenAiError error, const ChatRequest& request);

// Renders a chat request's events as OpenAI's chat.completion object, or
// as chat.completion.chunk events: the first of each choice (StreamStart)
// carries delta.role, the others delta.content, logprobs in chat's form
// (logprobs.content[] of token, logprob, bytes and top_logprobs), the last
// the finish_reason; then, once every choice finished, the usage chunk
// when asked for, and "data: [DONE]". A chunk holds one choice, with its
// index.
class ChatRenderer : public ChoicesRenderer {
 public:
  explicit ChatRenderer(CompletionContext context);

  // The stream's first chunks, one per choice, before any token.
  std::string StreamStart();

 private:
  nlohmann::ordered_json StreamChoice(const v1::GenerateResponse& run,
                                      int32_t index, bool final_chunk) override;
  nlohmann::ordered_json BodyChoice(const v1::GenerateResponse& run,
                                    int32_t index) override;
  nlohmann::ordered_json Logprobs(const v1::GenerateResponse& run) const;
};

}  // namespace seqboat

#endif  // SEQBOAT_SERVER_OPENAI_API_H_
