// The OpenAI completions and chat completions request bodies, mapped onto
// seqboat's own request: a /v1/completions body becomes a
// v1::GenerateRequest (which request_validation then checks, as for gRPC),
// and so does a /v1/chat/completions body once the model's chat template
// has rendered its messages. What the engine cannot do is refused, naming
// the parameter, as OpenAI's error object. Pure: no I/O, no engine.
#ifndef SEQBOAT_SERVER_OPENAI_REQUEST_H_
#define SEQBOAT_SERVER_OPENAI_REQUEST_H_

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "seqboat/v1/generate.pb.h"
#include "server/chat_template.h"
#include "server/openai_error.h"
#include "server/openai_tools.h"
#include "server/request_validation.h"

namespace seqboat {

// What one POST /v1/completions asks for.
struct CompletionRequest {
  // The prompt and every engine parameter, for RequestFromProto.
  v1::GenerateRequest generate;
  bool stream = false;
  bool include_usage = false;  // stream_options.include_usage
  // OpenAI's end-user id: the conversation key when no x-session-id header
  // names one (server/session_key.h).
  std::optional<std::string> user;
  // The parameter that constrains the output ("response_format",
  // "guided_json"...; "tool_choice" for one tools made), "" for none: what
  // errors about the constraint name (ConstraintError).
  std::string constraint_param;
};

// Parses a /v1/completions body: JSON syntax, the type of every field, the
// model name (absent, or `model_id`), and the parameters the engine has no
// equivalent for (best_of other than n, echo, suffix, logit_bias: refused
// naming the parameter), and the output's constraint (response_format or
// one of vLLM's guided_*; two are refused). Unknown fields are refused, as
// OpenAI does. Ranges are left to RequestFromProto, except
// where the JSON value cannot be represented in the proto's field (a
// negative max_tokens), which `limits` words as validation would. On failure
// returns false and fills *error.
bool ParseCompletionRequest(std::string_view body, const std::string& model_id,
                            const ValidationLimits& limits,
                            CompletionRequest* out, OpenAiError* error);

// The most messages one chat request may hold.
inline constexpr int kMaxChatMessages = 1024;

// What one POST /v1/chat/completions asks for.
struct ChatRequest {
  // Roles are "system", "user", "assistant" or "tool" ("developer" arrives
  // as "system"); content is text (a list of text parts joined by "\n");
  // an assistant's tool_calls and a tool message's tool_call_id are in
  // extra (openai_tools.h).
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
  // tools, tool_choice and parallel_tool_calls; "required" and a named
  // function also set completion's constraint (ToolChoiceSchema).
  ChatTools tools;
  // chat_template_kwargs, as vLLM names them: the template's own switches
  // (Qwen3's enable_thinking), each a template variable.
  nlohmann::ordered_json template_kwargs = nlohmann::ordered_json::object();
};

// Parses a /v1/chat/completions body: the messages (roles, content as a
// string or text parts, name), max_tokens or max_completion_tokens,
// logprobs and top_logprobs, and every parameter completions take, checked
// as ParseCompletionRequest checks them. Refuses, naming the parameter:
// unknown fields, no messages or more than kMaxChatMessages, an unknown
// role, missing content, parts that are not text, malformed tools or tool
// calls (openai_tools.h), two constraints (response_format, guided_*, and
// tool_choice "required" or named). On failure returns false and fills
// *error.
bool ParseChatRequest(std::string_view body, const std::string& model_id,
                      const ValidationLimits& limits, ChatRequest* out,
                      OpenAiError* error);

// An error about the fields of request.completion as the chat request
// names them: prompt is messages, logprobs is top_logprobs, max_tokens is
// the parameter the client used.
OpenAiError ChatError(OpenAiError error, const ChatRequest& request);

// An error of validation or the engine about the constraint (its field
// "sampling.json_schema", or the compiler's "json_schema: ...") named as
// the client's parameter `param` (CompletionRequest::constraint_param);
// other errors unchanged.
OpenAiError ConstraintError(OpenAiError error, const std::string& param);

}  // namespace seqboat

#endif  // SEQBOAT_SERVER_OPENAI_REQUEST_H_
