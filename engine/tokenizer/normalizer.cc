#include "engine/tokenizer/normalizer.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "engine/tokenizer/json_fields.h"

namespace seqboat {

using json = nlohmann::json;

absl::Status ParseStringPattern(const json& obj, const std::string& where,
                                std::string* out) {
  const std::string field = absl::StrCat(where, ".pattern");
  auto it = obj.find("pattern");
  if (it == obj.end() || !it->is_object()) {
    return FieldError(field, "must be an object {\"String\": ...}");
  }
  if (it->contains("Regex")) {
    return FieldError(field, "Regex patterns are not supported here");
  }
  auto s = it->find("String");
  if (s == it->end() || !s->is_string() ||
      s->get_ref<const std::string&>().empty()) {
    return FieldError(absl::StrCat(field, ".String"),
                      "must be a non-empty string");
  }
  *out = s->get<std::string>();
  return absl::OkStatus();
}

std::string ReplaceAll(std::string_view text, std::string_view pattern,
                       std::string_view content) {
  std::string out;
  out.reserve(text.size());
  size_t pos = 0;
  while (true) {
    const size_t hit = text.find(pattern, pos);
    if (hit == std::string_view::npos) break;
    out.append(text.substr(pos, hit - pos));
    out.append(content);
    pos = hit + pattern.size();
  }
  out.append(text.substr(pos));
  return out;
}

absl::Status Normalizer::ParseInto(const json& value, const std::string& where,
                                   std::vector<Step>* steps) {
  if (value.is_null()) return absl::OkStatus();
  std::string type;
  if (absl::Status s = TypeOf(value, where, &type); !s.ok()) return s;
  if (type == "Sequence") {
    auto list = value.find("normalizers");
    if (list == value.end() || !list->is_array()) {
      return FieldError(absl::StrCat(where, ".normalizers"),
                        "must be an array");
    }
    for (size_t i = 0; i < list->size(); ++i) {
      absl::Status s = ParseInto(
          (*list)[i], absl::StrCat(where, ".normalizers[", i, "]"), steps);
      if (!s.ok()) return s;
    }
    return absl::OkStatus();
  }
  Step step;
  if (type == "Prepend") {
    step.kind = Step::kPrepend;
    if (absl::Status s = RequiredString(value, "prepend", where, &step.content);
        !s.ok()) {
      return s;
    }
  } else if (type == "Replace") {
    step.kind = Step::kReplace;
    if (absl::Status s = ParseStringPattern(value, where, &step.pattern);
        !s.ok()) {
      return s;
    }
    if (absl::Status s = RequiredString(value, "content", where, &step.content);
        !s.ok()) {
      return s;
    }
  } else {
    return FieldError(
        absl::StrCat(where, ".type"),
        absl::StrCat("unsupported normalizer \"", type,
                     "\" (supported: Sequence, Prepend, Replace; Unicode "
                     "normalization forms such as NFC are not implemented)"));
  }
  steps->push_back(std::move(step));
  return absl::OkStatus();
}

absl::StatusOr<Normalizer> Normalizer::Parse(const json& value,
                                             const std::string& where) {
  Normalizer n;
  if (absl::Status s = ParseInto(value, where, &n.steps_); !s.ok()) return s;
  return n;
}

std::string Normalizer::Normalize(std::string_view text) const {
  std::string out(text);
  for (const Step& step : steps_) {
    switch (step.kind) {
      case Step::kPrepend:
        // Hugging Face prepends only to non-empty text.
        if (!out.empty()) out.insert(0, step.content);
        break;
      case Step::kReplace:
        out = ReplaceAll(out, step.pattern, step.content);
        break;
    }
  }
  return out;
}

}  // namespace seqboat
