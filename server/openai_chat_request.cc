// /v1/chat/completions bodies: the messages, and the rest as a completions
// request.
#include <algorithm>
#include <optional>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "base/json_reader.h"
#include "server/openai_request.h"
#include "server/openai_request_fields.h"
#include "server/openai_tools.h"

namespace seqboat {
namespace {

using openai::Field;
using openai::Invalid;
using openai::json;
using openai::ReadBody;
using openai::ReadBool;
using openai::Unsupported;

// The parameters a chat request may carry: the shared ones, and those read
// in ParseChatRequest.
const openai::ParameterSet& ChatParameters() {
  static const openai::ParameterSet* known =
      openai::WithShared({"messages", "max_tokens", "max_completion_tokens",
                          "logprobs", "top_logprobs", "tools", "tool_choice",
                          "parallel_tool_calls", "chat_template_kwargs"});
  return *known;
}

std::optional<OpenAiError> ReadContent(const json& content,
                                       const std::string& where,
                                       std::string* out) {
  if (content.is_string()) {
    *out = content.get<std::string>();
    return std::nullopt;
  }
  if (!content.is_array()) {
    return Invalid("messages",
                   absl::StrCat(where,
                                " must be a string or a list of text parts, "
                                "got ",
                                BriefJson(content)));
  }
  // Text parts joined by newlines, as vLLM joins them.
  for (size_t j = 0; j < content.size(); ++j) {
    const json& part = content[j];
    const std::string at = absl::StrCat(where, "[", j, "]");
    if (!part.is_object()) {
      return Invalid("messages", absl::StrCat(at, " must be an object"));
    }
    const json* type = Field(part, "type");
    if (type == nullptr || !type->is_string()) {
      return Invalid("messages", absl::StrCat(at, ".type must be a string"));
    }
    if (type->get<std::string>() != "text") {
      return Unsupported(
          "messages",
          absl::StrCat(at, " is of type '", type->get<std::string>(),
                       "'; this server takes text parts only"));
    }
    const json* text = Field(part, "text");
    if (text == nullptr || !text->is_string()) {
      return Invalid("messages", absl::StrCat(at, ".text must be a string"));
    }
    if (j > 0) *out += "\n";
    *out += text->get<std::string>();
  }
  return std::nullopt;
}

// The fields a message may carry: role, content, name and those of tool
// calls (read by ReadToolFields); the deprecated function_call and audio
// are refused as unsupported, anything else as unknown.
std::optional<OpenAiError> CheckMessageFields(const json& m,
                                              const std::string& where) {
  for (const auto& [key, value] : m.items()) {
    if (key == "role" || key == "content" || key == "name" ||
        key == "tool_calls" || key == "tool_call_id") {
      continue;
    }
    if (value.is_null()) continue;
    if (key == "function_call" || key == "audio" || key == "refusal") {
      return Unsupported("messages",
                         absl::StrCat(where, ".", key,
                                      " is not supported (tool calls are "
                                      "tool_calls)"));
    }
    return Invalid("messages",
                   absl::StrCat(where, " has an unknown field '", key, "'"));
  }
  return std::nullopt;
}

// messages[i], named `where` in errors.
std::optional<OpenAiError> ReadMessage(const json& m, const std::string& where,
                                       ChatMessage* message) {
  if (!m.is_object()) {
    return Invalid("messages", absl::StrCat(where, " must be an object"));
  }
  if (auto e = CheckMessageFields(m, where)) return e;
  const json* role = Field(m, "role");
  if (role == nullptr || !role->is_string()) {
    return Invalid("messages", absl::StrCat(where, ".role must be a string"));
  }
  message->role = role->get<std::string>();
  if (message->role == "developer") message->role = "system";
  if (message->role != "system" && message->role != "user" &&
      message->role != "assistant" && message->role != "tool") {
    return Invalid("messages",
                   absl::StrCat(where,
                                ".role must be 'system', 'developer', 'user', "
                                "'assistant' or 'tool', got ",
                                BriefJson(*role)));
  }
  if (auto e =
          openai::ReadToolFields(m, message->role, where, &message->extra)) {
    return e;
  }
  const json* content = Field(m, "content");
  // An assistant's turn that only called tools has no content.
  if (content == nullptr && !message->extra.contains("tool_calls")) {
    return Invalid("messages", absl::StrCat(where, ".content is missing"));
  }
  if (content != nullptr) {
    if (auto e = ReadContent(*content, absl::StrCat(where, ".content"),
                             &message->content)) {
      return e;
    }
  }
  if (const json* name = Field(m, "name")) {
    if (!name->is_string()) {
      return Invalid("messages", absl::StrCat(where, ".name must be a string"));
    }
    message->name = name->get<std::string>();
  }
  return std::nullopt;
}

std::optional<OpenAiError> ReadMessages(const json& body,
                                        std::vector<ChatMessage>* out) {
  const json* messages = Field(body, "messages");
  if (messages == nullptr) {
    return Invalid("messages", "messages is required");
  }
  if (!messages->is_array()) {
    return Invalid("messages", "messages must be an array of messages");
  }
  if (messages->empty()) {
    return Invalid("messages", "messages must hold at least one message");
  }
  if (messages->size() > static_cast<size_t>(kMaxChatMessages)) {
    return Invalid(
        "messages",
        absl::StrCat("messages holds ", messages->size(),
                     " messages, more than the limit of ", kMaxChatMessages));
  }
  for (size_t i = 0; i < messages->size(); ++i) {
    ChatMessage message;
    if (auto e = ReadMessage((*messages)[i], absl::StrCat("messages[", i, "]"),
                             &message)) {
      return e;
    }
    out->push_back(std::move(message));
  }
  return std::nullopt;
}

// chat_template_kwargs: an object of at most kMaxTemplateKwargs switches
// named like template variables; their values are the client's JSON.
std::optional<OpenAiError> ReadTemplateKwargs(const json& body,
                                              nlohmann::ordered_json* out) {
  constexpr size_t kMaxTemplateKwargs = 32;
  const json* kwargs = Field(body, "chat_template_kwargs");
  if (kwargs == nullptr || kwargs->is_null()) return std::nullopt;
  if (!kwargs->is_object()) {
    return Invalid("chat_template_kwargs",
                   "chat_template_kwargs must be an object");
  }
  if (kwargs->size() > kMaxTemplateKwargs) {
    return Invalid("chat_template_kwargs",
                   absl::StrCat("chat_template_kwargs holds more than ",
                                kMaxTemplateKwargs, " entries"));
  }
  for (const auto& [key, value] : kwargs->items()) {
    const bool identifier =
        !key.empty() && key.size() <= 64 && !absl::ascii_isdigit(key[0]) &&
        std::all_of(key.begin(), key.end(),
                    [](char c) { return absl::ascii_isalnum(c) || c == '_'; });
    if (!identifier) {
      return Invalid("chat_template_kwargs",
                     "chat_template_kwargs keys must be identifiers of at "
                     "most 64 letters, digits and underscores");
    }
    (*out)[key] = nlohmann::ordered_json::parse(value.dump());
  }
  return std::nullopt;
}

// Renames parameter `from` to `to` in an error, param and message.
void Rename(OpenAiError* e, const std::string& from, const std::string& to) {
  if (e->param != from) return;
  e->param = to;
  if (absl::StartsWith(e->message, from)) {
    e->message = to + e->message.substr(from.size());
  }
}

}  // namespace

bool ParseChatRequest(std::string_view body, const std::string& model_id,
                      const ValidationLimits& limits, ChatRequest* out,
                      OpenAiError* error) {
  auto fail = [error](OpenAiError e) {
    *error = std::move(e);
    return false;
  };
  json parsed;
  if (auto e = ReadBody(body, ChatParameters(), &parsed)) return fail(*e);
  *out = ChatRequest();
  if (auto e = ReadMessages(parsed, &out->messages)) return fail(*e);
  if (auto e = openai::ReadTools(parsed, &out->tools)) return fail(*e);
  if (auto e = ReadTemplateKwargs(parsed, &out->template_kwargs)) {
    return fail(*e);
  }

  // The rest is a completions request with these names.
  json completion = json::object();
  for (const char* key : openai::kSharedParameters) {
    if (auto it = parsed.find(key); it != parsed.end()) completion[key] = *it;
  }
  if (const json* limit = Field(parsed, "max_completion_tokens")) {
    completion["max_tokens"] = *limit;
    out->max_tokens_param = "max_completion_tokens";
  } else if (const json* limit = Field(parsed, "max_tokens")) {
    completion["max_tokens"] = *limit;
  }
  if (auto e = ReadBool(parsed, "logprobs", &out->logprobs)) return fail(*e);
  if (const json* top = Field(parsed, "top_logprobs")) {
    if (!out->logprobs) {
      return fail(
          Invalid("top_logprobs", "top_logprobs requires logprobs to be true"));
    }
    completion["logprobs"] = *top;
  } else if (out->logprobs) {
    completion["logprobs"] = 0;
  }
  if (!ParseCompletionRequest(completion.dump(), model_id, limits,
                              &out->completion, error)) {
    *error = ChatError(std::move(*error), *out);
    return false;
  }
  // "required" and a named function constrain the output to their calls.
  const std::string schema = ToolChoiceSchema(out->tools);
  if (!schema.empty()) {
    const std::string& other = out->completion.constraint_param;
    if (!other.empty()) {
      return fail(Invalid("tool_choice",
                          absl::StrCat("tool_choice and ", other,
                                       " both constrain the output; a "
                                       "request may carry one"),
                          "conflicting_constraints"));
    }
    out->completion.generate.mutable_sampling()->set_json_schema(schema);
    out->completion.constraint_param = "tool_choice";
  }
  return true;
}

OpenAiError ChatError(OpenAiError error, const ChatRequest& request) {
  Rename(&error, "prompt", "messages");
  Rename(&error, "logprobs", "top_logprobs");
  Rename(&error, "max_tokens", request.max_tokens_param);
  return error;
}

}  // namespace seqboat
