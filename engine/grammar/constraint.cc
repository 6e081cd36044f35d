#include "engine/grammar/constraint.h"

#include <cctype>
#include <cstdio>
#include <string>

#include "absl/strings/str_cat.h"
#include "base/json_reader.h"
#include "base/status_macros.h"
#include "engine/tokenizer/utf8.h"
#include "nlohmann/json.hpp"

namespace seqboat {
namespace {

absl::Status Refuse(ConstraintKind kind, std::string_view why) {
  return absl::InvalidArgumentError(
      absl::StrCat(AbslView(ConstraintKindName(kind)), ": ", AbslView(why)));
}

// Every {m} / {m,} / {m,n} count in `text` (regex and EBNF repetition)
// must be at most `max_repeat`. Counts are found syntactically, so a brace
// inside a string literal counts too: a false refusal of such a grammar is
// the cheaper mistake.
absl::Status CheckRepeatCounts(ConstraintKind kind, std::string_view text,
                               int64_t max_repeat) {
  auto is_digit = [&](size_t i) {
    return i < text.size() && std::isdigit(static_cast<unsigned char>(text[i]));
  };
  for (size_t i = 0; i < text.size(); ++i) {
    if (text[i] != '{') continue;
    size_t j = i + 1;
    while (j < text.size() &&
           (is_digit(j) || text[j] == ',' || text[j] == ' ')) {
      if (!is_digit(j)) {
        ++j;
        continue;
      }
      const size_t begin = j;
      while (text[j] == '0' && is_digit(j + 1)) ++j;  // zeros add nothing
      const size_t first = j;
      while (is_digit(j)) ++j;
      if (j - first > 12 ||
          std::stoll(std::string(text.substr(first, j - first))) > max_repeat)
        return Refuse(kind,
                      absl::StrCat("repetition count ",
                                   AbslView(text.substr(begin, j - begin)),
                                   " is over the limit of ", max_repeat));
    }
  }
  return absl::OkStatus();
}

bool IsValidUtf8(std::string_view text) { return Utf8Lossy(text) == text; }

// The schema keywords that count characters (each one a grammar state) and
// those that count items (a repeated rule).
constexpr const char* kLengthKeywords[] = {"minLength", "maxLength"};
constexpr const char* kCountKeywords[] = {"minItems", "maxItems",
                                          "minProperties", "maxProperties"};

absl::Status CheckSchemaKeyword(const nlohmann::json& value,
                                const char* keyword, int64_t limit) {
  auto it = value.find(keyword);
  if (it == value.end() || !it->is_number()) return absl::OkStatus();
  if (it->get<double>() > static_cast<double>(limit))
    return Refuse(ConstraintKind::kJsonSchema,
                  absl::StrCat("\"", keyword, "\": ", BriefJson(*it),
                               " is over the limit of ", limit));
  return absl::OkStatus();
}

absl::Status CheckSchemaCounts(const nlohmann::json& value,
                               const ConstraintLimits& limits) {
  if (value.is_array()) {
    for (const nlohmann::json& item : value)
      RETURN_IF_ERROR(CheckSchemaCounts(item, limits));
    return absl::OkStatus();
  }
  if (!value.is_object()) return absl::OkStatus();
  for (const char* keyword : kLengthKeywords)
    RETURN_IF_ERROR(CheckSchemaKeyword(value, keyword, limits.max_repeat));
  for (const char* keyword : kCountKeywords)
    RETURN_IF_ERROR(CheckSchemaKeyword(value, keyword, limits.max_count));
  for (const auto& [key, item] : value.items())
    RETURN_IF_ERROR(CheckSchemaCounts(item, limits));
  return absl::OkStatus();
}

}  // namespace

std::string_view ConstraintKindName(ConstraintKind kind) {
  switch (kind) {
    case ConstraintKind::kJsonSchema:
      return "json_schema";
    case ConstraintKind::kAnyJson:
      return "json_object";
    case ConstraintKind::kRegex:
      return "regex";
    case ConstraintKind::kChoice:
      return "choice";
    case ConstraintKind::kGrammar:
      return "grammar";
  }
  return "unknown";
}

absl::Status CheckConstraint(const Constraint& c,
                             const ConstraintLimits& limits) {
  int64_t bytes = static_cast<int64_t>(c.text.size());
  for (const std::string& choice : c.choices)
    bytes += static_cast<int64_t>(choice.size());
  if (bytes > limits.max_text_bytes)
    return Refuse(c.kind, absl::StrCat(bytes, " bytes is over the limit of ",
                                       limits.max_text_bytes));
  switch (c.kind) {
    case ConstraintKind::kAnyJson:
      return absl::OkStatus();
    case ConstraintKind::kJsonSchema: {
      nlohmann::json schema;
      if (absl::Status s = ParseJson(c.text, "schema", &schema); !s.ok())
        return Refuse(c.kind, std::string(s.message()));
      if (!schema.is_object() && !schema.is_boolean())
        return Refuse(c.kind, "the schema must be a JSON object");
      RETURN_IF_ERROR(CheckSchemaCounts(schema, limits));
      // A "pattern" is a regex inside the schema: its counts too.
      return CheckRepeatCounts(c.kind, c.text, limits.max_repeat);
    }
    case ConstraintKind::kRegex:
    case ConstraintKind::kGrammar:
      if (c.text.empty()) return Refuse(c.kind, "empty");
      if (!IsValidUtf8(c.text)) return Refuse(c.kind, "not valid UTF-8");
      return CheckRepeatCounts(c.kind, c.text, limits.max_repeat);
    case ConstraintKind::kChoice:
      if (c.choices.empty()) return Refuse(c.kind, "no choices given");
      if (static_cast<int64_t>(c.choices.size()) > limits.max_choices)
        return Refuse(c.kind, absl::StrCat(c.choices.size(),
                                           " choices is over the limit of ",
                                           limits.max_choices));
      for (size_t i = 0; i < c.choices.size(); ++i) {
        if (c.choices[i].empty())
          return Refuse(c.kind, absl::StrCat("choice ", i, " is empty"));
        if (!IsValidUtf8(c.choices[i]))
          return Refuse(c.kind,
                        absl::StrCat("choice ", i, " is not valid UTF-8"));
      }
      return absl::OkStatus();
  }
  return Refuse(c.kind, "unknown constraint kind");
}

std::string ChoicesToEbnf(const std::vector<std::string>& choices) {
  std::string out = "root ::= ";
  for (size_t i = 0; i < choices.size(); ++i) {
    if (i > 0) out += " | ";
    out += '"';
    for (unsigned char ch : choices[i]) {
      if (ch == '"' || ch == '\\') {
        out += '\\';
        out += static_cast<char>(ch);
      } else if (ch < 0x20 || ch == 0x7F) {
        // \uHHHH has a fixed length; \x would swallow following hex digits.
        char escaped[8];
        std::snprintf(escaped, sizeof(escaped), "\\u%04X", ch);
        out += escaped;
      } else {
        out += static_cast<char>(ch);
      }
    }
    out += '"';
  }
  out += '\n';
  return out;
}

}  // namespace seqboat
