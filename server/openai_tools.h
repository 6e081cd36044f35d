// Chat's tools as the OpenAI API spells them, on the request side: `tools`
// (functions with a name, description and JSON Schema parameters),
// `tool_choice` ("none", "auto", "required" or {"type": "function",
// "function": {"name"}}), `parallel_tool_calls`, and the messages of a
// conversation that called tools (an assistant's tool_calls, a "tool"
// message's tool_call_id) in the form transformers gives chat templates
// (arguments as objects). "required" and a named function are enforced as
// vLLM enforces them: a JSON Schema constraint on the whole output (an array
// of {name, parameters} over the tools; the named function's parameters).
// Pure. Internal to //server:openai_request.
#ifndef SEQBOAT_SERVER_OPENAI_TOOLS_H_
#define SEQBOAT_SERVER_OPENAI_TOOLS_H_

#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "server/openai_error.h"

namespace seqboat {

// Bounds on what a request's tools may hold (OpenAI allows 128 tools).
inline constexpr int kMaxTools = 128;

enum class ToolChoice {
  kNone,      // no tool calls are looked for in the output
  kAuto,      // the model decides; calls are parsed by the server's parser
  kRequired,  // one or more calls, the output constrained to them
  kNamed,     // exactly one call of `named`, its arguments constrained
};

struct ChatTools {
  // What the template gets as `tools`: the request's, as sent (null: none).
  nlohmann::ordered_json tools;
  // OpenAI's default: auto with tools, none without.
  ToolChoice choice = ToolChoice::kNone;
  std::string named;  // kNamed: the function
  bool parallel = true;
};

namespace openai {

// tools, tool_choice and parallel_tool_calls of a chat body. Refused naming
// the parameter: a tool that is not {"type": "function", "function":
// {"name", "description", "parameters", "strict"}}, a name of other than 1
// to 64 letters, digits, '_' and '-', two tools of one name, more than
// kMaxTools, a tool_choice naming no tool or asking for tools without any.
std::optional<OpenAiError> ReadTools(const nlohmann::json& body,
                                     ChatTools* out);

// A message's tool fields, `where` naming it ("messages[2]"), into `extra`
// (ChatMessage::extra): an assistant's tool_calls, each {"id", "type":
// "function", "function": {"name", "arguments"}} with arguments, a JSON
// object's text, given to the template as that object; a tool message's
// tool_call_id (required).
std::optional<OpenAiError> ReadToolFields(const nlohmann::json& message,
                                          const std::string& role,
                                          const std::string& where,
                                          nlohmann::ordered_json* extra);

}  // namespace openai

// The JSON Schema that enforces kRequired (an array of at least one
// {"name", "parameters"} object, name one of the tools' and parameters its
// schema; exactly one when !parallel) or kNamed (the function's parameters
// schema); "" for kNone and kAuto. A tool without parameters takes any
// object.
std::string ToolChoiceSchema(const ChatTools& tools);

}  // namespace seqboat

#endif  // SEQBOAT_SERVER_OPENAI_TOOLS_H_
