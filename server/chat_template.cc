#include "server/chat_template.h"

#include <nlohmann/json.hpp>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "base/json_reader.h"
#include "base/status_macros.h"
#include "server/jinja/json_value.h"

namespace seqboat {
namespace {

using json = nlohmann::json;

// The special tokens transformers hands templates (its
// SPECIAL_TOKENS_ATTRIBUTES), as tokenizer_config.json names them.
constexpr const char* kSpecialTokens[] = {"bos_token", "eos_token", "unk_token",
                                          "sep_token", "pad_token", "cls_token",
                                          "mask_token"};

// A token is a string or an AddedToken object {"content": ...}.
absl::StatusOr<std::optional<std::string>> TokenString(
    const json& value, const std::string& where) {
  if (value.is_null()) return std::nullopt;
  if (value.is_string()) return value.get<std::string>();
  if (value.is_object()) {
    auto content = value.find("content");
    if (content != value.end() && content->is_string()) {
      return content->get<std::string>();
    }
  }
  return absl::InvalidArgumentError(
      absl::StrCat(where,
                   " must be a string or an object with a string "
                   "\"content\", got ",
                   BriefJson(value)));
}

}  // namespace

absl::StatusOr<std::unique_ptr<ChatTemplate>> ChatTemplate::FromModelDir(
    const ModelDir& dir, const jinja::Limits& limits) {
  const std::string path = dir.FilePath("tokenizer_config.json");
  if (!dir.tokenizer_config_json().has_value()) {
    return absl::NotFoundError(absl::StrCat(
        path, " does not exist, so the model has no chat template"));
  }
  return FromTokenizerConfig(*dir.tokenizer_config_json(), path, limits);
}

absl::StatusOr<std::unique_ptr<ChatTemplate>> ChatTemplate::FromTokenizerConfig(
    std::string_view json_text, const std::string& source,
    const jinja::Limits& limits) {
  json config;
  RETURN_IF_ERROR(ParseJson(json_text, source, &config));
  if (!config.is_object()) {
    return absl::InvalidArgumentError(
        absl::StrCat(source, ": must hold a JSON object"));
  }
  auto found = config.find("chat_template");
  if (found == config.end() || found->is_null()) {
    return absl::NotFoundError(
        absl::StrCat(source,
                     " has no chat_template, so the model has no chat "
                     "template"));
  }
  std::string source_text;
  if (found->is_string()) {
    source_text = found->get<std::string>();
  } else if (found->is_array()) {
    // transformers' named templates; apply_chat_template uses "default".
    std::vector<std::string> names;
    bool have_default = false;
    for (const json& entry : *found) {
      if (!entry.is_object() || !entry.contains("name") ||
          !entry["name"].is_string() || !entry.contains("template") ||
          !entry["template"].is_string()) {
        return absl::InvalidArgumentError(absl::StrCat(
            source,
            ": chat_template entries must be objects with a string "
            "\"name\" and \"template\", got ",
            BriefJson(entry)));
      }
      const std::string name = entry["name"].get<std::string>();
      names.push_back(absl::StrCat("'", name, "'"));
      if (name == "default" && !have_default) {
        source_text = entry["template"].get<std::string>();
        have_default = true;
      }
    }
    if (!have_default) {
      return absl::NotFoundError(absl::StrCat(
          source, " has chat templates named ", absl::StrJoin(names, ", "),
          " but none named 'default'"));
    }
  } else {
    return absl::InvalidArgumentError(
        absl::StrCat(source,
                     ": chat_template must be a string or a list of named "
                     "templates, got ",
                     BriefJson(*found)));
  }

  std::unique_ptr<ChatTemplate> t(new ChatTemplate());
  for (const char* key : kSpecialTokens) {
    auto it = config.find(key);
    if (it == config.end()) continue;
    ASSIGN_OR_RETURN(std::optional<std::string> token,
                     TokenString(*it, absl::StrCat(source, ": ", key)));
    if (token.has_value()) t->special_tokens_.emplace_back(key, *token);
  }
  if (auto it = config.find("additional_special_tokens");
      it != config.end() && !it->is_null()) {
    if (!it->is_array()) {
      return absl::InvalidArgumentError(absl::StrCat(
          source, ": additional_special_tokens must be a list, got ",
          BriefJson(*it)));
    }
    for (size_t i = 0; i < it->size(); ++i) {
      ASSIGN_OR_RETURN(
          std::optional<std::string> token,
          TokenString(
              (*it)[i],
              absl::StrCat(source, ": additional_special_tokens[", i, "]")));
      if (token.has_value()) t->additional_special_tokens_.push_back(*token);
    }
  }
  absl::StatusOr<std::unique_ptr<jinja::Template>> parsed =
      jinja::Template::Parse(source_text, limits);
  if (!parsed.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat(source, ": chat_template: ", parsed.status().message()));
  }
  t->template_ = *std::move(parsed);
  return t;
}

absl::StatusOr<jinja::Str> ChatTemplate::Render(
    const std::vector<ChatMessage>& messages, const ChatOptions& options,
    absl::Time now) const {
  using jinja::Value;
  std::vector<Value> list;
  list.reserve(messages.size());
  for (const ChatMessage& m : messages) {
    std::vector<std::pair<Value, Value>> fields;
    fields.emplace_back(Value::String("role"), Value::String(m.role));
    fields.emplace_back(Value::String("content"),
                        Value::String(jinja::Untrusted(m.content)));
    if (m.name.has_value()) {
      fields.emplace_back(Value::String("name"),
                          Value::String(jinja::Untrusted(*m.name)));
    }
    for (const auto& [key, field] : m.extra.items()) {
      ASSIGN_OR_RETURN(Value v, jinja::FromJson(field, /*untrusted=*/true));
      fields.emplace_back(Value::String(key), std::move(v));
    }
    ASSIGN_OR_RETURN(Value message, Value::Dict(std::move(fields)));
    list.push_back(std::move(message));
  }
  jinja::Variables variables;
  for (const auto& [name, token] : special_tokens_) {
    variables.emplace_back(name, Value::String(token));
  }
  if (!additional_special_tokens_.empty()) {
    std::vector<Value> tokens;
    for (const std::string& token : additional_special_tokens_) {
      tokens.push_back(Value::String(token));
    }
    ASSIGN_OR_RETURN(Value additional, Value::List(std::move(tokens)));
    variables.emplace_back("additional_special_tokens", std::move(additional));
  }
  ASSIGN_OR_RETURN(Value messages_value, Value::List(std::move(list)));
  variables.emplace_back("messages", std::move(messages_value));
  ASSIGN_OR_RETURN(Value tools, jinja::FromJson(options.tools, true));
  variables.emplace_back("tools", std::move(tools));
  variables.emplace_back("documents", Value::None());
  variables.emplace_back("add_generation_prompt",
                         Value::Bool(options.add_generation_prompt));
  for (const auto& [key, field] : options.kwargs.items()) {
    for (const auto& [given, unused] : variables) {
      if (given == key) {
        return absl::InvalidArgumentError(absl::StrCat(
            "chat_template_kwargs: \"", key,
            "\" is a variable the server sets; it cannot be passed"));
      }
    }
    ASSIGN_OR_RETURN(Value v, jinja::FromJson(field, true));
    variables.emplace_back(key, std::move(v));
  }
  return template_->Render(variables, now);
}

}  // namespace seqboat
