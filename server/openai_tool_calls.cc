#include "server/openai_tool_calls.h"

#include <utility>
#include <vector>

namespace seqboat {
namespace {

using ojson = nlohmann::ordered_json;
using Mode = ToolCallOptions::Mode;

}  // namespace

ChoiceToolCalls::ChoiceToolCalls(ToolCallOptions options,
                                 std::function<std::string()> new_id)
    : options_(std::move(options)), new_id_(std::move(new_id)) {
  if (options_.mode == Mode::kParsed) parser_.emplace(options_.format);
}

std::string ChoiceToolCalls::Take(const ToolCallPiece& piece, ojson* deltas,
                                  bool streaming) {
  for (const ToolCall& call : piece.calls) {
    ojson function;
    function["name"] = call.name;
    function["arguments"] = streaming ? std::string() : call.arguments;
    ojson first;
    if (streaming) first["index"] = calls_;
    first["id"] = new_id_();
    first["type"] = "function";
    first["function"] = std::move(function);
    deltas->push_back(std::move(first));
    if (streaming) {
      ojson arguments;
      arguments["index"] = calls_;
      arguments["function"] = {{"arguments", call.arguments}};
      deltas->push_back(std::move(arguments));
    }
    ++calls_;
  }
  return piece.content;
}

std::string ChoiceToolCalls::Feed(std::string_view text, ojson* deltas) {
  switch (options_.mode) {
    case Mode::kText:
      return std::string(text);
    case Mode::kParsed: {
      ToolCallPiece piece;
      parser_->Feed(text, &piece);
      return Take(piece, deltas, /*streaming=*/true);
    }
    case Mode::kRequired:
    case Mode::kNamed:
      whole_.append(text.data(), text.size());
      return "";
  }
  return "";
}

ToolCallPiece ChoiceToolCalls::DecideWhole() {
  ToolCallPiece piece;
  std::optional<std::vector<ToolCall>> calls;
  if (options_.mode == Mode::kRequired) {
    calls = ParseRequiredToolCalls(whole_);
  } else {
    const ojson arguments = ojson::parse(whole_, nullptr, false);
    if (!arguments.is_discarded() && arguments.is_object()) {
      calls.emplace().push_back({options_.named, arguments.dump()});
    }
  }
  // Cut short (max_tokens), the JSON is incomplete: it is content.
  if (calls.has_value()) {
    piece.calls = *std::move(calls);
  } else {
    piece.content = std::move(whole_);
  }
  whole_.clear();
  return piece;
}

std::string ChoiceToolCalls::Finish(ojson* deltas) {
  ToolCallPiece piece;
  switch (options_.mode) {
    case Mode::kText:
      return "";
    case Mode::kParsed:
      parser_->Finish(&piece);
      break;
    case Mode::kRequired:
    case Mode::kNamed:
      piece = DecideWhole();
      break;
  }
  return Take(piece, deltas, /*streaming=*/true);
}

void ChoiceToolCalls::Message(std::string_view output, ojson* message) {
  ToolCallPiece piece;
  switch (options_.mode) {
    case Mode::kText:
      piece.content = std::string(output);
      break;
    case Mode::kParsed:
      parser_->Feed(output, &piece);
      parser_->Finish(&piece);
      break;
    case Mode::kRequired:
    case Mode::kNamed:
      whole_ = std::string(output);
      piece = DecideWhole();
      break;
  }
  ojson calls = ojson::array();
  const std::string content = Take(piece, &calls, /*streaming=*/false);
  (*message)["content"] =
      content.empty() && !calls.empty() ? ojson(nullptr) : ojson(content);
  if (!calls.empty()) (*message)["tool_calls"] = std::move(calls);
}

}  // namespace seqboat
