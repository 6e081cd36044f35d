// Tool calls in a model's output, in the formats chat templates teach
// models, by the names vLLM's --tool-call-parser gives them:
//   hermes       <tool_call>\n{"name": ..., "arguments": {...}}\n</tool_call>
//                (Qwen 2.5/3, Hermes), any number of them
//   llama3_json  {"name": ..., "parameters": {...}} as the whole output, after
//                an optional <|python_tag|>; several joined by ';'
// Read incrementally, as the output streams: text that is decided to be no
// call goes out as content at once; text that may begin a marker is held
// back until the next piece decides it. A call that does not parse (bad
// JSON, no name, arguments not an object, or a marker never closed) is
// content, never an error. Pure.
#ifndef SEQBOAT_SERVER_TOOL_CALL_PARSER_H_
#define SEQBOAT_SERVER_TOOL_CALL_PARSER_H_

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"

namespace seqboat {

enum class ToolCallFormat { kHermes, kLlama3Json };

// "hermes" or "llama3_json"; INVALID_ARGUMENT naming the known ones.
absl::StatusOr<ToolCallFormat> ToolCallFormatByName(std::string_view name);

struct ToolCall {
  std::string name;
  std::string arguments;  // a JSON object's text, compact
};

// What one piece of output decided.
struct ToolCallPiece {
  std::string content;          // text to pass on as the message's content
  std::vector<ToolCall> calls;  // calls completed, in order
};

class ToolCallParser {
 public:
  explicit ToolCallParser(ToolCallFormat format) : format_(format) {}

  // The output's next text; what it decides is appended to *out.
  void Feed(std::string_view text, ToolCallPiece* out);
  // The output ended: what was held back is decided (an unclosed hermes call
  // that parses is a call; anything else content).
  void Finish(ToolCallPiece* out);

  // Whether any call was found so far.
  bool called() const { return called_; }

 private:
  void FeedHermes(ToolCallPiece* out);
  void FeedLlama(ToolCallPiece* out);
  // Content, except whitespace alone, which waits for the next non-space
  // text (whitespace between and after calls is not content).
  void Emit(std::string_view text, ToolCallPiece* out);

  const ToolCallFormat format_;
  std::string held_;
  bool in_call_ = false;  // hermes: inside <tool_call>
  enum class Llama { kUndecided, kContent, kJson } llama_ = Llama::kUndecided;
  std::string pending_space_;
  bool called_ = false;
};

// One call's JSON object ({"name", "arguments" or "parameters"}), or none
// when it is not one.
std::optional<ToolCall> ParseToolCallObject(std::string_view json_text);

// The output of a request constrained by tool_choice "required": a JSON
// array of {"name", "parameters"}; none when it is not one (e.g. cut short
// by max_tokens).
std::optional<std::vector<ToolCall>> ParseRequiredToolCalls(
    std::string_view output);

}  // namespace seqboat

#endif  // SEQBOAT_SERVER_TOOL_CALL_PARSER_H_
