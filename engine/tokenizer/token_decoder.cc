#include "engine/tokenizer/token_decoder.h"

#include <cstdlib>
#include <utility>

#include "absl/strings/str_cat.h"
#include "base/json_reader.h"
#include "base/status_macros.h"
#include "engine/tokenizer/byte_level.h"
#include "engine/tokenizer/normalizer.h"

namespace seqboat {
namespace {

using json = nlohmann::json;

int HexDigit(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

}  // namespace

absl::Status TokenDecoder::ParseInto(const json& value,
                                     const std::string& where, bool* fused,
                                     std::vector<Step>* steps) {
  if (value.is_null()) {
    return FieldError(where,
                      "null is not supported (tokens would be joined with "
                      "spaces); use ByteLevel or a Sequence");
  }
  std::string type;
  RETURN_IF_ERROR(TypeOf(value, where, &type));
  Step step;
  if (type == "Sequence") {
    auto list = value.find("decoders");
    if (list == value.end() || !list->is_array()) {
      return FieldError(absl::StrCat(where, ".decoders"), "must be an array");
    }
    for (size_t i = 0; i < list->size(); ++i) {
      absl::Status s = ParseInto(
          (*list)[i], absl::StrCat(where, ".decoders[", i, "]"), fused, steps);
      if (!s.ok()) return s;
    }
    return absl::OkStatus();
  } else if (type == "Fuse") {
    *fused = true;
    return absl::OkStatus();
  } else if (type == "ByteLevel") {
    step.kind = Step::kByteLevel;
  } else if (type == "ByteFallback") {
    step.kind = Step::kByteFallback;
  } else if (type == "Replace") {
    step.kind = Step::kReplace;
    RETURN_IF_ERROR(ParseStringPattern(value, where, &step.pattern));
    RETURN_IF_ERROR(RequiredString(value, "content", where, &step.content));
  } else if (type == "Strip") {
    std::string content;
    int64_t start;
    int64_t stop;
    RETURN_IF_ERROR(RequiredString(value, "content", where, &content));
    if (content != " ") {
      return FieldError(absl::StrCat(where, ".content"),
                        "only \" \" is supported");
    }
    RETURN_IF_ERROR(RequiredInt(value, "start", where, 0, 1 << 20, &start));
    RETURN_IF_ERROR(RequiredInt(value, "stop", where, 0, 1 << 20, &stop));
    if (*fused) {
      // After Fuse the strip applies to the whole text; only its start can
      // be done while streaming.
      if (stop != 0 || start > 1) {
        return FieldError(where,
                          "after Fuse only start <= 1 and stop 0 are "
                          "supported");
      }
      if (start == 0) return absl::OkStatus();
      step.kind = Step::kStripStart;
    } else {
      step.kind = Step::kStrip;
      step.start = static_cast<int>(start);
      step.stop = static_cast<int>(stop);
    }
  } else if (type == "Metaspace") {
    step.kind = Step::kMetaspace;
    step.pattern = "\xE2\x96\x81";
    RETURN_IF_ERROR(OptionalString(value, "replacement", where, &step.pattern));
    if (step.pattern.empty()) {
      return FieldError(absl::StrCat(where, ".replacement"),
                        "must not be empty");
    }
    std::string scheme = "always";
    RETURN_IF_ERROR(OptionalString(value, "prepend_scheme", where, &scheme));
    step.drop_first = scheme != "never";
  } else {
    return FieldError(absl::StrCat(where, ".type"),
                      absl::StrCat("unsupported decoder \"", type,
                                   "\" (supported: ByteLevel, Replace, "
                                   "ByteFallback, Fuse, Strip, Metaspace, "
                                   "Sequence)"));
  }
  steps->push_back(std::move(step));
  return absl::OkStatus();
}

absl::StatusOr<TokenDecoder> TokenDecoder::Parse(const json& value,
                                                 const std::string& where,
                                                 bool null_joins_words) {
  TokenDecoder decoder;
  if (value.is_null() && null_joins_words) {
    decoder.steps_.push_back({Step::kJoinWords});
    return decoder;
  }
  bool fused = false;
  RETURN_IF_ERROR(ParseInto(value, where, &fused, &decoder.steps_));
  return decoder;
}

std::string TokenDecoder::Decode(std::string_view token,
                                 bool at_text_start) const {
  std::string text(token);
  for (const Step& step : steps_) {
    switch (step.kind) {
      case Step::kByteLevel: {
        std::string bytes;
        // Tokens outside the mapping (some added tokens) stay as they are.
        if (ByteLevelDecode(text, &bytes)) text = std::move(bytes);
        break;
      }
      case Step::kReplace:
        text = ReplaceAll(text, step.pattern, step.content);
        break;
      case Step::kByteFallback:
        if (text.size() == 6 && text.compare(0, 3, "<0x") == 0 &&
            text[5] == '>' && HexDigit(text[3]) >= 0 &&
            HexDigit(text[4]) >= 0) {
          text = std::string(
              1, static_cast<char>(HexDigit(text[3]) * 16 + HexDigit(text[4])));
        }
        break;
      case Step::kStrip: {
        size_t begin = 0;
        while (begin < text.size() && begin < static_cast<size_t>(step.start) &&
               text[begin] == ' ') {
          ++begin;
        }
        size_t end = text.size();
        while (end > begin &&
               text.size() - end < static_cast<size_t>(step.stop) &&
               text[end - 1] == ' ') {
          --end;
        }
        text = text.substr(begin, end - begin);
        break;
      }
      case Step::kStripStart:
        if (at_text_start && !text.empty() && text[0] == ' ') text.erase(0, 1);
        break;
      case Step::kMetaspace:
        text = ReplaceAll(text, step.pattern,
                          at_text_start && step.drop_first ? "" : " ");
        break;
      case Step::kJoinWords:
        // An id without a word (a hole in the vocabulary) adds no space.
        if (!at_text_start && !text.empty()) text.insert(0, " ");
        break;
    }
  }
  return text;
}

}  // namespace seqboat
