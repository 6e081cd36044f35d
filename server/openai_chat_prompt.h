// A chat request's prompt as the engine takes it: the messages, rendered
// by the model's chat template, tokenized with the template's special
// tokens as control tokens and the messages' bytes as text (a client that
// spells "<|im_end|>" gets text, not a turn end); and what refuses one, as
// OpenAI's error object naming "messages"; how its output is read for
// tool calls.
#ifndef SEQBOAT_SERVER_OPENAI_CHAT_PROMPT_H_
#define SEQBOAT_SERVER_OPENAI_CHAT_PROMPT_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "engine/tokenizer/tokenizer.h"
#include "server/chat_template.h"
#include "server/jinja/text.h"
#include "server/openai_error.h"
#include "server/openai_tool_calls.h"
#include "server/openai_tools.h"
#include "server/tool_call_parser.h"

namespace seqboat {

// The rendered prompt's token ids.
std::vector<int32_t> EncodeChatPrompt(const jinja::Str& prompt,
                                      const Tokenizer& tokenizer);

// The ids that end a turn, which chat requests also stop at: the template's
// eos_token ("<|im_end|>", "<|eot_id|>") when it is one special token.
std::vector<int32_t> ChatStopIds(const ChatTemplate& chat_template,
                                 const Tokenizer& tokenizer);

// A 400 for a model without a usable chat template (`why` says what is
// wrong with it): code no_chat_template.
OpenAiError NoChatTemplateError(const std::string& model_id,
                                const std::string& why);

// A 400 for messages the template would not render (its Render status):
// chat_template_refused when the template raised an exception,
// prompt_too_long when it reached a limit, chat_template_error otherwise.
OpenAiError ChatTemplateError(const absl::Status& status);

// How a chat request's output is read for tool calls (*out): its
// tool_choice, and for auto the server's parser. A 400 naming tool_choice
// when it is auto over tools and the server has no parser.
std::optional<OpenAiError> ToolCallMode(
    const ChatTools& tools, const std::optional<ToolCallFormat>& parser,
    ToolCallOptions* out);

}  // namespace seqboat

#endif  // SEQBOAT_SERVER_OPENAI_CHAT_PROMPT_H_
