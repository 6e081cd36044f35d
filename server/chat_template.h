// A model's chat template: the Jinja template of its tokenizer_config.json
// ("chat_template": a string, or a list of {"name", "template"} of which the
// one named "default" is used) with the special-token strings the file
// names (bos_token, eos_token...), rendered over a conversation the way
// transformers' apply_chat_template(messages, tokenize=False,
// add_generation_prompt=...) renders it.
//
// The rendered prompt keeps which of its bytes came from the messages'
// content and names (Str::untrusted), so that special-token text a client
// writes is not read as a control token; roles are trusted, as callers pass
// only known role names.
#ifndef SEQBOAT_SERVER_CHAT_TEMPLATE_H_
#define SEQBOAT_SERVER_CHAT_TEMPLATE_H_

#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "engine/model_dir/model_dir.h"
#include "server/jinja/template.h"
#include "server/jinja/text.h"

namespace seqboat {

struct ChatMessage {
  std::string role;
  std::string content;
  std::optional<std::string> name;
  // The message's other fields as the client sent them (tool_calls,
  // reasoning_content, tool_call_id...), each a variable of the message.
  nlohmann::ordered_json extra = nlohmann::ordered_json::object();
};

// What a request adds to the conversation: the tools it offers (a JSON array,
// null for none) and the template's own switches (chat_template_kwargs, e.g.
// Qwen3's enable_thinking), each a template variable.
struct ChatOptions {
  bool add_generation_prompt = true;
  nlohmann::ordered_json tools;  // null: none
  nlohmann::ordered_json kwargs = nlohmann::ordered_json::object();
};

class ChatTemplate {
 public:
  // The template of `dir`'s tokenizer_config.json. NOT_FOUND when the file
  // or its chat_template is absent (a model without a template);
  // INVALID_ARGUMENT, naming the file, when the file cannot be read or the
  // template does not parse.
  static absl::StatusOr<std::unique_ptr<ChatTemplate>> FromModelDir(
      const ModelDir& dir, const jinja::Limits& limits = {});
  // The same from the text of a tokenizer_config.json; `source` names it in
  // errors.
  static absl::StatusOr<std::unique_ptr<ChatTemplate>> FromTokenizerConfig(
      std::string_view json_text, const std::string& source,
      const jinja::Limits& limits = {});

  // Renders `messages` with add_generation_prompt, bos_token, eos_token and
  // the other special-token strings, the tools (documents None) and the
  // options' kwargs, as transformers' apply_chat_template(messages, tools=,
  // **kwargs) does. Everything from the client (contents, names, message
  // extras, tools, kwargs) is untrusted text. INVALID_ARGUMENT for a kwarg
  // that would replace a variable the template is given; other errors are
  // jinja::Template::Render's.
  absl::StatusOr<jinja::Str> Render(const std::vector<ChatMessage>& messages,
                                    const ChatOptions& options,
                                    absl::Time now = absl::Now()) const;
  absl::StatusOr<jinja::Str> Render(const std::vector<ChatMessage>& messages,
                                    bool add_generation_prompt = true,
                                    absl::Time now = absl::Now()) const {
    ChatOptions options;
    options.add_generation_prompt = add_generation_prompt;
    return Render(messages, options, now);
  }

  // The special-token strings the template sees, by variable name.
  const std::vector<std::pair<std::string, std::string>>& special_tokens()
      const {
    return special_tokens_;
  }

 private:
  ChatTemplate() = default;

  std::unique_ptr<jinja::Template> template_;
  std::vector<std::pair<std::string, std::string>> special_tokens_;
  std::vector<std::string> additional_special_tokens_;
};

}  // namespace seqboat

#endif  // SEQBOAT_SERVER_CHAT_TEMPLATE_H_
