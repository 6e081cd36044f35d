#include "server/openai_constraint.h"

#include <string>
#include <utility>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "base/json_reader.h"
#include "server/openai_request.h"
#include "server/openai_request_fields.h"

namespace seqboat::openai {
namespace {

std::optional<OpenAiError> ReadJsonSchemaFormat(const json& format,
                                                v1::SamplingParams* sampling) {
  const json* spec = Field(format, "json_schema");
  if (spec == nullptr || !spec->is_object()) {
    return Invalid("response_format",
                   "response_format.json_schema must be an object of name, "
                   "schema, strict and description");
  }
  for (const auto& [key, value] : spec->items()) {
    if (key != "name" && key != "schema" && key != "strict" &&
        key != "description") {
      return Invalid("response_format",
                     absl::StrCat("response_format.json_schema has an unknown "
                                  "field '",
                                  key, "'"));
    }
  }
  const json* name = Field(*spec, "name");
  if (name == nullptr || !name->is_string() ||
      !openai::IsOpenAiName(name->get<std::string>())) {
    return Invalid("response_format",
                   "response_format.json_schema.name must be 1 to 64 "
                   "letters, digits, '_' or '-'");
  }
  if (const json* strict = Field(*spec, "strict");
      strict && !strict->is_boolean()) {
    return Invalid("response_format",
                   "response_format.json_schema.strict must be a boolean");
  }
  const json* schema = Field(*spec, "schema");
  // No schema: any JSON, as OpenAI reads it. strict false still constrains:
  // a schema given is a schema kept.
  if (schema == nullptr) {
    sampling->mutable_json_object();
    return std::nullopt;
  }
  if (!schema->is_object()) {
    return Invalid("response_format",
                   "response_format.json_schema.schema must be a JSON "
                   "Schema object");
  }
  sampling->set_json_schema(schema->dump());
  return std::nullopt;
}

std::optional<OpenAiError> ReadResponseFormat(const json& format,
                                              v1::SamplingParams* sampling,
                                              bool* set) {
  const json* type = format.is_object() ? Field(format, "type") : nullptr;
  if (type == nullptr || !type->is_string()) {
    return Invalid("response_format",
                   "response_format must be an object with a type: \"text\", "
                   "\"json_object\" or \"json_schema\"");
  }
  const std::string kind = type->get<std::string>();
  for (const auto& [key, value] : format.items()) {
    if (key != "type" && !(kind == "json_schema" && key == "json_schema")) {
      return Invalid("response_format",
                     absl::StrCat("response_format has an unknown field '", key,
                                  "' for type ", kind));
    }
  }
  if (kind == "text") return std::nullopt;
  *set = true;
  if (kind == "json_object") {
    sampling->mutable_json_object();
    return std::nullopt;
  }
  if (kind == "json_schema") return ReadJsonSchemaFormat(format, sampling);
  return Unsupported("response_format",
                     absl::StrCat("response_format.type must be \"text\", "
                                  "\"json_object\" or \"json_schema\", got ",
                                  BriefJson(*type)));
}

std::optional<OpenAiError> ReadGuided(const json& body, const char* key,
                                      v1::SamplingParams* sampling) {
  const json& v = *Field(body, key);
  const std::string name = key;
  if (name == "guided_json") {
    // vLLM takes the schema as an object or as its JSON text.
    if (v.is_object()) {
      sampling->set_json_schema(v.dump());
    } else if (v.is_string()) {
      sampling->set_json_schema(v.get<std::string>());
    } else {
      return Invalid(key,
                     "guided_json must be a JSON Schema (an object or its "
                     "JSON text)");
    }
    return std::nullopt;
  }
  if (name == "guided_choice") {
    if (!v.is_array()) {
      return Invalid(key, "guided_choice must be an array of strings");
    }
    v1::Choices* choices = sampling->mutable_choice();
    for (size_t i = 0; i < v.size(); ++i) {
      if (!v[i].is_string()) {
        return Invalid(
            key, absl::StrCat("guided_choice[", i, "] must be a string, got ",
                              BriefJson(v[i])));
      }
      choices->add_choices(v[i].get<std::string>());
    }
    return std::nullopt;
  }
  if (!v.is_string()) {
    return Invalid(key, absl::StrCat(key, " must be a string"));
  }
  if (name == "guided_regex") sampling->set_regex(v.get<std::string>());
  if (name == "guided_grammar") sampling->set_grammar(v.get<std::string>());
  return std::nullopt;
}

}  // namespace

std::optional<OpenAiError> ReadConstraint(const json& body,
                                          v1::SamplingParams* sampling,
                                          std::string* param) {
  std::vector<std::string> given;
  if (const json* format = Field(body, "response_format")) {
    bool set = false;
    if (auto e = ReadResponseFormat(*format, sampling, &set)) return e;
    if (set) given.push_back("response_format");
  }
  for (const char* key :
       {"guided_json", "guided_regex", "guided_choice", "guided_grammar"}) {
    if (Field(body, key) == nullptr) continue;
    given.push_back(key);
    if (given.size() > 1) break;
    if (auto e = ReadGuided(body, key, sampling)) return e;
  }
  if (given.size() > 1) {
    return Invalid(given[1],
                   absl::StrCat(given[0], " and ", given[1],
                                " both constrain the output; a request may "
                                "carry one"),
                   "conflicting_constraints");
  }
  if (!given.empty()) *param = given[0];
  return std::nullopt;
}

}  // namespace seqboat::openai

namespace seqboat {

OpenAiError ConstraintError(OpenAiError error, const std::string& param) {
  if (param.empty() || !error.param.empty() || error.http_status != 400) {
    return error;
  }
  for (const char* field :
       {"sampling.json_schema", "sampling.json_object", "sampling.regex",
        "sampling.choice", "sampling.grammar", "json_schema", "json_object",
        "regex", "choice", "grammar"}) {
    const std::string prefix = field;
    if (!absl::StartsWith(error.message, prefix)) continue;
    const char next = error.message.size() > prefix.size()
                          ? error.message[prefix.size()]
                          : '\0';
    if (next != ' ' && next != ':') continue;
    error.param = param;
    error.message = absl::StrCat(param, " (", prefix, ")",
                                 error.message.substr(prefix.size()));
    break;
  }
  return error;
}

}  // namespace seqboat
