// One chat choice's output read for tool calls, rendered as OpenAI's
// message.tool_calls (each {"id": "call_...", "type": "function",
// "function": {"name", "arguments"}}) or, streaming, as delta.tool_calls: a
// call's first delta carries its index, id, type and function.name (with
// empty arguments), the next its arguments. How the output is read depends
// on tool_choice: auto reads the markers of the server's parser
// (tool_call_parser.h) and passes the rest on as content; required and a
// named function constrained the whole output to JSON (openai_tools.h),
// which is read once it is complete. An output that holds no call it
// promised is content.
#ifndef SEQBOAT_SERVER_OPENAI_TOOL_CALLS_H_
#define SEQBOAT_SERVER_OPENAI_TOOL_CALLS_H_

#include <cstdint>
#include <functional>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>

#include "server/tool_call_parser.h"

namespace seqboat {

struct ToolCallOptions {
  enum class Mode {
    kText,      // no tools, or tool_choice none: the output is content
    kParsed,    // auto: `format`'s markers
    kRequired,  // the output is a JSON array of {name, parameters}
    kNamed,     // the output is `named`'s arguments
  };
  Mode mode = Mode::kText;
  ToolCallFormat format = ToolCallFormat::kHermes;
  std::string named;
};

class ChoiceToolCalls {
 public:
  // `new_id` makes each call's id ("call_" and random characters).
  ChoiceToolCalls(ToolCallOptions options, std::function<std::string()> new_id);

  // Streaming: the choice's next text. Returns the content to stream now;
  // calls completed are appended to *deltas as delta.tool_calls entries.
  std::string Feed(std::string_view text, nlohmann::ordered_json* deltas);
  // The choice ended: what was held back, likewise.
  std::string Finish(nlohmann::ordered_json* deltas);

  // Non-streaming: the whole output as the message's content (null when
  // calls took all of it) and tool_calls (absent when none).
  void Message(std::string_view output, nlohmann::ordered_json* message);

  // Whether the output held calls: finish_reason reads "tool_calls".
  bool called() const { return calls_ > 0; }

 private:
  // Appends the piece's calls to *calls (streaming: as deltas) and returns
  // its content.
  std::string Take(const ToolCallPiece& piece, nlohmann::ordered_json* calls,
                   bool streaming);
  // kRequired and kNamed: whole_ read as their JSON.
  ToolCallPiece DecideWhole();

  const ToolCallOptions options_;
  const std::function<std::string()> new_id_;
  std::optional<ToolCallParser> parser_;  // kParsed
  std::string whole_;                     // kRequired, kNamed: held to the end
  int32_t calls_ = 0;
};

}  // namespace seqboat

#endif  // SEQBOAT_SERVER_OPENAI_TOOL_CALLS_H_
