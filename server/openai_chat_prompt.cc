#include "server/openai_chat_prompt.h"

#include <utility>

#include "absl/strings/str_cat.h"

namespace seqboat {
namespace {

OpenAiError Refusal(std::string message, std::string code) {
  OpenAiError e;
  e.message = std::move(message);
  e.param = "messages";
  e.code = std::move(code);
  return e;
}

}  // namespace

std::vector<int32_t> EncodeChatPrompt(const jinja::Str& prompt,
                                      const Tokenizer& tokenizer) {
  std::vector<TextRange> literal;
  literal.reserve(prompt.untrusted.size());
  for (const jinja::Span& span : prompt.untrusted) {
    literal.push_back({span.begin, span.end});
  }
  return tokenizer.EncodeChat(prompt.text, literal);
}

std::vector<int32_t> ChatStopIds(const ChatTemplate& chat_template,
                                 const Tokenizer& tokenizer) {
  std::vector<int32_t> stop_ids;
  for (const auto& [name, token] : chat_template.special_tokens()) {
    if (name != "eos_token") continue;
    const std::vector<int32_t> ids = tokenizer.EncodeChat(token, {});
    if (ids.size() == 1 && tokenizer.IsSpecial(ids[0])) {
      stop_ids.push_back(ids[0]);
    }
  }
  return stop_ids;
}

OpenAiError NoChatTemplateError(const std::string& model_id,
                                const std::string& why) {
  return Refusal(absl::StrCat("The model `", model_id,
                              "` has no usable chat template: ", why,
                              "; send the prompt to /v1/completions instead"),
                 "no_chat_template");
}

OpenAiError ChatTemplateError(const absl::Status& status) {
  const std::string why(status.message());
  switch (status.code()) {
    case absl::StatusCode::kAborted:
      return Refusal(
          absl::StrCat("The model's chat template refused the messages: ", why),
          "chat_template_refused");
    case absl::StatusCode::kResourceExhausted:
      return Refusal(absl::StrCat("The messages, rendered through the "
                                  "model's chat template, are over the "
                                  "server's limits: ",
                                  why),
                     "prompt_too_long");
    default:
      return Refusal(
          absl::StrCat("The model's chat template cannot render these "
                       "messages: chat template ",
                       why),
          "chat_template_error");
  }
}

std::optional<OpenAiError> ToolCallMode(
    const ChatTools& tools, const std::optional<ToolCallFormat>& parser,
    ToolCallOptions* out) {
  using Mode = ToolCallOptions::Mode;
  *out = ToolCallOptions();
  switch (tools.choice) {
    case ToolChoice::kNone:
      out->mode = Mode::kText;
      break;
    case ToolChoice::kRequired:
      out->mode = Mode::kRequired;
      break;
    case ToolChoice::kNamed:
      out->mode = Mode::kNamed;
      out->named = tools.named;
      break;
    case ToolChoice::kAuto:
      if (!parser.has_value()) {
        OpenAiError e;
        e.message =
            "tool_choice \"auto\" (the default with tools) needs the "
            "server's --tool_call_parser; use \"required\", a named "
            "function or \"none\"";
        e.param = "tool_choice";
        e.code = "unsupported_value";
        return e;
      }
      out->mode = Mode::kParsed;
      out->format = *parser;
      break;
  }
  return std::nullopt;
}

}  // namespace seqboat
