// A /v1/completions body, as the OpenAI port receives it: parsed by
// ParseCompletionRequest, then validated by RequestFromProto as a gRPC
// request is; and the same bytes as a /v1/chat/completions body. A refused
// body gets a 400 (404 for an unknown model is not what this API says)
// whose message and error object are valid UTF-8 and JSON; an accepted one
// gives what validation gives a GenerateRequest.
#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

#include "engine/tokenizer/utf8.h"
#include "fuzz/fuzz_check.h"
#include "fuzz/request_checks.h"
#include "server/openai_error.h"
#include "server/openai_request.h"
#include "server/request_validation.h"

namespace {

bool IsValidUtf8(std::string_view text) {
  return seqboat::Utf8Lossy(text) == text;
}

void CheckError(const seqboat::OpenAiError& error) {
  FUZZ_CHECK(!error.message.empty());
  FUZZ_CHECK(IsValidUtf8(error.message), "%s", error.message.c_str());
  FUZZ_CHECK(nlohmann::json::accept(seqboat::ErrorBody(error)));
}

}  // namespace

// The same bytes as a /v1/chat/completions body: refused with a 400, or
// messages within the limit, of the roles a template is given (tool fields
// where they belong), with the completion's parameters as
// ParseCompletionRequest reads them and tool_choice's constraint.
void CheckChat(std::string_view body) {
  seqboat::ChatRequest chat;
  seqboat::OpenAiError error;
  if (!seqboat::ParseChatRequest(
          body, "seqboat", seqboat::fuzz::RequestLimits(), &chat, &error)) {
    FUZZ_CHECK(error.http_status == 400, "%d", error.http_status);
    CheckError(error);
    return;
  }
  FUZZ_CHECK(!chat.messages.empty());
  FUZZ_CHECK(chat.messages.size() <=
             static_cast<size_t>(seqboat::kMaxChatMessages));
  for (const seqboat::ChatMessage& m : chat.messages) {
    FUZZ_CHECK(m.role == "system" || m.role == "user" ||
                   m.role == "assistant" || m.role == "tool",
               "%s", m.role.c_str());
    // A tool message answers a call; calls are an assistant's only.
    FUZZ_CHECK((m.role == "tool") == m.extra.contains("tool_call_id"));
    FUZZ_CHECK(m.role == "assistant" || !m.extra.contains("tool_calls"));
  }
  // required and a named function constrain the output to their calls.
  const bool forced = chat.tools.choice == seqboat::ToolChoice::kRequired ||
                      chat.tools.choice == seqboat::ToolChoice::kNamed;
  FUZZ_CHECK(!forced ||
             (chat.completion.constraint_param == "tool_choice" &&
              chat.completion.generate.sampling().has_json_schema()));
  FUZZ_CHECK(!chat.completion.generate.has_text() &&
             !chat.completion.generate.has_token_ids());
  FUZZ_CHECK(chat.logprobs == chat.completion.generate.logprobs().enabled());
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view body(reinterpret_cast<const char*>(data), size);
  CheckChat(body);
  seqboat::CompletionRequest parsed;
  seqboat::OpenAiError error;
  if (!seqboat::ParseCompletionRequest(
          body, "seqboat", seqboat::fuzz::RequestLimits(), &parsed, &error)) {
    FUZZ_CHECK(error.http_status == 400, "%d", error.http_status);
    CheckError(error);
    return 0;
  }
  const auto request = seqboat::RequestFromProto(
      parsed.generate, seqboat::fuzz::RequestVocabulary(),
      seqboat::fuzz::RequestLimits(), seqboat::fuzz::Fallbacks());
  seqboat::fuzz::CheckValidated(parsed.generate, request);
  if (!request.ok()) {
    const seqboat::OpenAiError refused =
        seqboat::ErrorFromStatus(request.status());
    FUZZ_CHECK(refused.http_status == 400 || refused.http_status == 500, "%d",
               refused.http_status);
    CheckError(refused);
  }
  return 0;
}
