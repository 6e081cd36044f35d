#include "server/openai_tools.h"

#include <set>
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "base/json_reader.h"
#include "server/openai_request_fields.h"

namespace seqboat {
namespace {

using ojson = nlohmann::ordered_json;
using openai::Field;
using openai::Invalid;
using openai::json;

std::optional<OpenAiError> ReadTool(const json& tool, size_t i,
                                    std::set<std::string>* names) {
  const std::string at = absl::StrCat("tools[", i, "]");
  const json* type = tool.is_object() ? Field(tool, "type") : nullptr;
  if (type == nullptr || !type->is_string()) {
    return Invalid("tools", absl::StrCat(at, " must be an object with a type"));
  }
  if (type->get<std::string>() != "function") {
    return openai::Unsupported(
        "tools",
        absl::StrCat(at, ".type must be \"function\", got ", BriefJson(*type)));
  }
  for (const auto& [key, value] : tool.items()) {
    if (key != "type" && key != "function") {
      return Invalid("tools",
                     absl::StrCat(at, " has an unknown field '", key, "'"));
    }
  }
  const json* function = Field(tool, "function");
  if (function == nullptr || !function->is_object()) {
    return Invalid("tools", absl::StrCat(at, ".function must be an object"));
  }
  for (const auto& [key, value] : function->items()) {
    if (key != "name" && key != "description" && key != "parameters" &&
        key != "strict") {
      return Invalid("tools", absl::StrCat(at,
                                           ".function has an unknown "
                                           "field '",
                                           key, "'"));
    }
  }
  const json* name = Field(*function, "name");
  if (name == nullptr || !name->is_string() ||
      !openai::IsOpenAiName(name->get<std::string>())) {
    return Invalid("tools",
                   absl::StrCat(at,
                                ".function.name must be 1 to 64 letters, "
                                "digits, '_' or '-'"));
  }
  if (!names->insert(name->get<std::string>()).second) {
    return Invalid(
        "tools", absl::StrCat(at, ".function.name '", name->get<std::string>(),
                              "' names an earlier tool too"));
  }
  if (const json* d = Field(*function, "description"); d && !d->is_string()) {
    return Invalid("tools",
                   absl::StrCat(at, ".function.description must be a string"));
  }
  if (const json* p = Field(*function, "parameters"); p && !p->is_object()) {
    return Invalid("tools", absl::StrCat(at,
                                         ".function.parameters must be a "
                                         "JSON Schema object"));
  }
  if (const json* s = Field(*function, "strict"); s && !s->is_boolean()) {
    return Invalid("tools",
                   absl::StrCat(at, ".function.strict must be a boolean"));
  }
  return std::nullopt;
}

std::optional<OpenAiError> ReadToolChoice(const json& choice,
                                          const std::set<std::string>& names,
                                          ChatTools* out) {
  if (choice.is_string()) {
    const std::string mode = choice.get<std::string>();
    if (mode == "none") {
      out->choice = ToolChoice::kNone;
    } else if (mode == "auto") {
      out->choice = ToolChoice::kAuto;
    } else if (mode == "required") {
      out->choice = ToolChoice::kRequired;
    } else {
      return Invalid("tool_choice",
                     absl::StrCat("tool_choice must be \"none\", \"auto\", "
                                  "\"required\" or a named function, got ",
                                  BriefJson(choice)));
    }
  } else {
    const json* type = choice.is_object() ? Field(choice, "type") : nullptr;
    const json* function =
        choice.is_object() ? Field(choice, "function") : nullptr;
    const json* name = function != nullptr && function->is_object()
                           ? Field(*function, "name")
                           : nullptr;
    if (type == nullptr || *type != "function" || name == nullptr ||
        !name->is_string()) {
      return Invalid("tool_choice",
                     "tool_choice must be \"none\", \"auto\", \"required\" or "
                     "{\"type\": \"function\", \"function\": {\"name\": ...}}");
    }
    out->choice = ToolChoice::kNamed;
    out->named = name->get<std::string>();
    if (names.count(out->named) == 0) {
      return Invalid("tool_choice",
                     absl::StrCat("tool_choice names the function '",
                                  out->named, "', which no tool defines"));
    }
  }
  if (out->choice != ToolChoice::kNone && names.empty()) {
    return Invalid("tool_choice",
                   "tool_choice asks for tool calls but the request has no "
                   "tools");
  }
  return std::nullopt;
}

}  // namespace

namespace openai {

std::optional<OpenAiError> ReadTools(const json& body, ChatTools* out) {
  std::set<std::string> names;
  if (const json* tools = Field(body, "tools")) {
    if (!tools->is_array()) {
      return Invalid("tools", "tools must be an array of tools");
    }
    if (tools->size() > static_cast<size_t>(kMaxTools)) {
      return Invalid(
          "tools", absl::StrCat("tools holds ", tools->size(),
                                " tools, more than the limit of ", kMaxTools));
    }
    for (size_t i = 0; i < tools->size(); ++i) {
      if (auto e = ReadTool((*tools)[i], i, &names)) return e;
    }
    if (!tools->empty()) out->tools = ojson::parse(tools->dump());
  }
  out->choice = names.empty() ? ToolChoice::kNone : ToolChoice::kAuto;
  if (const json* choice = Field(body, "tool_choice")) {
    if (auto e = ReadToolChoice(*choice, names, out)) return e;
  }
  if (auto e = ReadBool(body, "parallel_tool_calls", &out->parallel)) return e;
  return std::nullopt;
}

namespace {

std::optional<OpenAiError> ReadToolCall(const json& call, const std::string& at,
                                        ojson* out) {
  if (!call.is_object()) {
    return Invalid("messages", absl::StrCat(at, " must be an object"));
  }
  const json* id = Field(call, "id");
  const json* type = Field(call, "type");
  const json* function = Field(call, "function");
  if (id == nullptr || !id->is_string()) {
    return Invalid("messages", absl::StrCat(at, ".id must be a string"));
  }
  if (type != nullptr && *type != "function") {
    return openai::Unsupported("messages",
                               absl::StrCat(at, ".type must be \"function\""));
  }
  const json* name = function != nullptr && function->is_object()
                         ? Field(*function, "name")
                         : nullptr;
  const json* arguments = function != nullptr && function->is_object()
                              ? Field(*function, "arguments")
                              : nullptr;
  if (name == nullptr || !name->is_string()) {
    return Invalid("messages",
                   absl::StrCat(at, ".function.name must be a string"));
  }
  if (arguments == nullptr || !arguments->is_string()) {
    return Invalid("messages",
                   absl::StrCat(at,
                                ".function.arguments must be a string (the "
                                "arguments' JSON)"));
  }
  // Templates read the arguments as a mapping, as transformers gives them.
  ojson parsed = ojson::parse(arguments->get<std::string>(), nullptr,
                              /*allow_exceptions=*/false);
  if (parsed.is_discarded() || !parsed.is_object()) {
    return Invalid("messages",
                   absl::StrCat(at,
                                ".function.arguments must be a JSON object's "
                                "text"));
  }
  ojson function_out;
  function_out["name"] = name->get<std::string>();
  function_out["arguments"] = std::move(parsed);
  (*out)["id"] = id->get<std::string>();
  (*out)["type"] = "function";
  (*out)["function"] = std::move(function_out);
  return std::nullopt;
}

}  // namespace

std::optional<OpenAiError> ReadToolFields(const json& message,
                                          const std::string& role,
                                          const std::string& where,
                                          ojson* extra) {
  const json* calls = Field(message, "tool_calls");
  if (calls != nullptr) {
    if (role != "assistant") {
      return Invalid("messages",
                     absl::StrCat(where,
                                  ".tool_calls is only for assistant "
                                  "messages"));
    }
    if (!calls->is_array()) {
      return Invalid("messages",
                     absl::StrCat(where, ".tool_calls must be an array"));
    }
    if (calls->size() > static_cast<size_t>(kMaxTools)) {
      return Invalid("messages", absl::StrCat(where,
                                              ".tool_calls holds more "
                                              "than ",
                                              kMaxTools, " calls"));
    }
    ojson out = ojson::array();
    for (size_t j = 0; j < calls->size(); ++j) {
      ojson call;
      if (auto e = ReadToolCall((*calls)[j],
                                absl::StrCat(where, ".tool_calls[", j, "]"),
                                &call)) {
        return e;
      }
      out.push_back(std::move(call));
    }
    (*extra)["tool_calls"] = std::move(out);
  }
  const json* id = Field(message, "tool_call_id");
  if (role == "tool") {
    if (id == nullptr || !id->is_string()) {
      return Invalid("messages",
                     absl::StrCat(where,
                                  ".tool_call_id must be the id of the call "
                                  "this message answers"));
    }
    (*extra)["tool_call_id"] = id->get<std::string>();
  } else if (id != nullptr) {
    return Invalid(
        "messages",
        absl::StrCat(where, ".tool_call_id is only for tool messages"));
  }
  return std::nullopt;
}

}  // namespace openai

namespace {

ojson ParametersOf(const ojson& tool) {
  const ojson& function = tool["function"];
  auto it = function.find("parameters");
  if (it == function.end() || it->is_null()) {
    return ojson{{"type", "object"}};
  }
  return *it;
}

}  // namespace

std::string ToolChoiceSchema(const ChatTools& tools) {
  if (tools.choice == ToolChoice::kNamed) {
    for (const ojson& tool : tools.tools) {
      if (tool["function"]["name"] == tools.named) {
        return ParametersOf(tool).dump();
      }
    }
    return "";
  }
  if (tools.choice != ToolChoice::kRequired) return "";
  ojson any_of = ojson::array();
  for (const ojson& tool : tools.tools) {
    ojson properties;
    properties["name"] = {{"type", "string"},
                          {"enum", ojson::array({tool["function"]["name"]})}};
    properties["parameters"] = ParametersOf(tool);
    ojson item;
    item["type"] = "object";
    item["properties"] = std::move(properties);
    item["required"] = ojson::array({"name", "parameters"});
    any_of.push_back(std::move(item));
  }
  ojson schema;
  schema["type"] = "array";
  schema["minItems"] = 1;
  if (!tools.parallel) schema["maxItems"] = 1;
  schema["items"] = {{"anyOf", std::move(any_of)}};
  return schema.dump();
}

}  // namespace seqboat
