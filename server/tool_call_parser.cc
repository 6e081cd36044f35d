#include "server/tool_call_parser.h"

#include <algorithm>
#include <nlohmann/json.hpp>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"

namespace seqboat {
namespace {

using ojson = nlohmann::ordered_json;

constexpr std::string_view kHermesOpen = "<tool_call>";
constexpr std::string_view kHermesClose = "</tool_call>";
constexpr std::string_view kPythonTag = "<|python_tag|>";

// The length of the longest suffix of `text` that is a proper prefix of
// `marker`: the text that may yet become the marker.
size_t MarkerPrefixAtEnd(std::string_view text, std::string_view marker) {
  for (size_t n = std::min(text.size(), marker.size() - 1); n > 0; --n) {
    if (text.substr(text.size() - n) == marker.substr(0, n)) return n;
  }
  return 0;
}

// `text` without its leading whitespace (and trailing, when `trailing`).
std::string_view StripSpace(std::string_view text, bool trailing) {
  while (!text.empty() && absl::ascii_isspace(text.front())) {
    text.remove_prefix(1);
  }
  while (trailing && !text.empty() && absl::ascii_isspace(text.back())) {
    text.remove_suffix(1);
  }
  return text;
}

bool AllSpace(std::string_view text) {
  return std::all_of(text.begin(), text.end(),
                     [](char c) { return absl::ascii_isspace(c); });
}

std::optional<ToolCall> CallFrom(const ojson& value, const char* arguments) {
  if (!value.is_object()) return std::nullopt;
  auto name = value.find("name");
  if (name == value.end() || !name->is_string() ||
      name->get<std::string>().empty()) {
    return std::nullopt;
  }
  auto args = value.find(arguments);
  // Llama's format names them "parameters", hermes "arguments"; either is
  // taken, as models mix them.
  if (args == value.end()) {
    args = value.find(std::string_view(arguments) == "arguments" ? "parameters"
                                                                 : "arguments");
  }
  ToolCall call;
  call.name = name->get<std::string>();
  if (args == value.end() || args->is_null()) {
    call.arguments = "{}";
  } else if (args->is_object()) {
    call.arguments = args->dump();
  } else {
    return std::nullopt;
  }
  return call;
}

ojson ParseOrDiscard(std::string_view text) {
  return ojson::parse(text.begin(), text.end(), nullptr,
                      /*allow_exceptions=*/false);
}

// Llama 3's calls: one object, or several joined by ';'.
std::optional<std::vector<ToolCall>> ParseLlamaCalls(std::string_view text) {
  std::vector<ToolCall> calls;
  ojson whole = ParseOrDiscard(text);
  if (!whole.is_discarded()) {
    std::optional<ToolCall> call = CallFrom(whole, "parameters");
    if (!call.has_value()) return std::nullopt;
    calls.push_back(*std::move(call));
    return calls;
  }
  // Split at the ';' that parse: try each ';' as a boundary in turn.
  size_t start = 0;
  while (start < text.size()) {
    size_t end = start;
    std::optional<ToolCall> call;
    while (true) {
      end = text.find(';', end);
      const std::string_view piece = text.substr(
          start,
          end == std::string_view::npos ? std::string_view::npos : end - start);
      ojson value = ParseOrDiscard(piece);
      if (!value.is_discarded()) {
        call = CallFrom(value, "parameters");
        break;
      }
      if (end == std::string_view::npos) break;
      ++end;
    }
    if (!call.has_value()) return std::nullopt;
    calls.push_back(*std::move(call));
    if (end == std::string_view::npos) break;
    start = end + 1;
  }
  if (calls.empty()) return std::nullopt;
  return calls;
}

}  // namespace

absl::StatusOr<ToolCallFormat> ToolCallFormatByName(std::string_view name) {
  if (name == "hermes") return ToolCallFormat::kHermes;
  if (name == "llama3_json") return ToolCallFormat::kLlama3Json;
  return absl::InvalidArgumentError(
      absl::StrCat("unknown tool call parser \"", std::string(name),
                   "\"; known: hermes, llama3_json"));
}

std::optional<ToolCall> ParseToolCallObject(std::string_view json_text) {
  ojson value = ParseOrDiscard(json_text);
  if (value.is_discarded()) return std::nullopt;
  return CallFrom(value, "arguments");
}

std::optional<std::vector<ToolCall>> ParseRequiredToolCalls(
    std::string_view output) {
  ojson value = ParseOrDiscard(output);
  if (value.is_discarded() || !value.is_array() || value.empty()) {
    return std::nullopt;
  }
  std::vector<ToolCall> calls;
  for (const ojson& item : value) {
    std::optional<ToolCall> call = CallFrom(item, "parameters");
    if (!call.has_value()) return std::nullopt;
    calls.push_back(*std::move(call));
  }
  return calls;
}

void ToolCallParser::Emit(std::string_view text, ToolCallPiece* out) {
  if (text.empty()) return;
  if (AllSpace(text)) {
    pending_space_.append(text.data(), text.size());
    return;
  }
  // Whitespace that follows non-space text within `text` is held too.
  size_t end = text.size();
  while (end > 0 && absl::ascii_isspace(text[end - 1])) --end;
  out->content += pending_space_;
  out->content.append(text.data(), end);
  pending_space_ = std::string(text.substr(end));
}

void ToolCallParser::Feed(std::string_view text, ToolCallPiece* out) {
  held_.append(text.data(), text.size());
  if (format_ == ToolCallFormat::kHermes) {
    FeedHermes(out);
  } else {
    FeedLlama(out);
  }
}

void ToolCallParser::FeedHermes(ToolCallPiece* out) {
  while (true) {
    if (!in_call_) {
      const size_t open = held_.find(kHermesOpen);
      if (open == std::string::npos) {
        const size_t keep = MarkerPrefixAtEnd(held_, kHermesOpen);
        Emit(std::string_view(held_).substr(0, held_.size() - keep), out);
        held_.erase(0, held_.size() - keep);
        return;
      }
      Emit(std::string_view(held_).substr(0, open), out);
      held_.erase(0, open + kHermesOpen.size());
      in_call_ = true;
      continue;
    }
    const size_t close = held_.find(kHermesClose);
    if (close == std::string::npos) return;
    const std::string_view body = std::string_view(held_).substr(0, close);
    std::optional<ToolCall> call = ParseToolCallObject(body);
    if (call.has_value()) {
      out->calls.push_back(*std::move(call));
      called_ = true;
      pending_space_.clear();
    } else {
      Emit(std::string(kHermesOpen) + std::string(body) +
               std::string(kHermesClose),
           out);
    }
    held_.erase(0, close + kHermesClose.size());
    in_call_ = false;
  }
}

void ToolCallParser::FeedLlama(ToolCallPiece* out) {
  if (llama_ == Llama::kContent) {
    Emit(held_, out);
    held_.clear();
    return;
  }
  if (llama_ == Llama::kJson) return;  // decided at the end
  const std::string_view start = StripSpace(held_, /*trailing=*/false);
  if (start.empty()) return;
  if (start[0] == '{' || start.substr(0, kPythonTag.size()) == kPythonTag) {
    llama_ = Llama::kJson;
    return;
  }
  if (start.size() < kPythonTag.size() &&
      kPythonTag.substr(0, start.size()) == start) {
    return;  // may yet be the tag
  }
  llama_ = Llama::kContent;
  Emit(held_, out);
  held_.clear();
}

void ToolCallParser::Finish(ToolCallPiece* out) {
  if (format_ == ToolCallFormat::kHermes) {
    if (in_call_) {
      // A call the model ended without its closing tag.
      std::optional<ToolCall> call = ParseToolCallObject(held_);
      if (call.has_value()) {
        out->calls.push_back(*std::move(call));
        called_ = true;
      } else {
        Emit(std::string(kHermesOpen) + held_, out);
      }
      in_call_ = false;
    } else {
      Emit(held_, out);
    }
  } else if (llama_ == Llama::kJson) {
    std::string_view text = StripSpace(held_, /*trailing=*/true);
    if (text.substr(0, kPythonTag.size()) == kPythonTag) {
      text.remove_prefix(kPythonTag.size());
    }
    std::optional<std::vector<ToolCall>> calls = ParseLlamaCalls(text);
    if (calls.has_value()) {
      for (ToolCall& call : *calls) out->calls.push_back(std::move(call));
      called_ = true;
    } else {
      Emit(held_, out);
    }
  } else {
    Emit(held_, out);
  }
  held_.clear();
  // Whitespace around calls is no content; without calls it is the text's.
  if (!called_) out->content += pending_space_;
  pending_space_.clear();
}

}  // namespace seqboat
