#include "engine/tokenizer/normalizer.h"

#include <cstdint>
#include <limits>
#include <utility>

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "base/json_reader.h"
#include "engine/tokenizer/unicode_chars.h"
#include "unicode/bytestream.h"
#include "unicode/normalizer2.h"
#include "unicode/stringpiece.h"
#include "unicode/utypes.h"

namespace seqboat {

using json = nlohmann::json;

namespace {

// ICU's instance for a form name, or null if `type` names none.
absl::StatusOr<const icu::Normalizer2*> UnicodeForm(const std::string& type,
                                                    const std::string& where) {
  UErrorCode status = U_ZERO_ERROR;
  const icu::Normalizer2* form = nullptr;
  if (type == "NFC") {
    form = icu::Normalizer2::getNFCInstance(status);
  } else if (type == "NFD") {
    form = icu::Normalizer2::getNFDInstance(status);
  } else if (type == "NFKC") {
    form = icu::Normalizer2::getNFKCInstance(status);
  } else if (type == "NFKD") {
    form = icu::Normalizer2::getNFKDInstance(status);
  } else {
    return nullptr;
  }
  if (U_FAILURE(status) || form == nullptr) {
    return FieldError(where, absl::StrCat("ICU has no ", type,
                                          " data: ", u_errorName(status)));
  }
  return form;
}

// Appends the normalized form of `run` (well-formed UTF-8) to *out.
void AppendNormalizedRun(const icu::Normalizer2& form, std::string_view run,
                         std::string* out) {
  if (run.empty()) return;
  const size_t kept = out->size();
  UErrorCode status = U_ZERO_ERROR;
  if (run.size() <= static_cast<size_t>(std::numeric_limits<int32_t>::max())) {
    icu::StringByteSink<std::string> sink(out);
    form.normalizeUTF8(
        0, icu::StringPiece(run.data(), static_cast<int32_t>(run.size())), sink,
        nullptr, status);
  } else {
    status = U_INDEX_OUTOFBOUNDS_ERROR;
  }
  // Only allocation failure or a run ICU cannot index (2 GiB, far beyond any
  // request) get here; the text is then left as it was.
  if (U_FAILURE(status)) {
    out->resize(kept);
    out->append(run);
  }
}

// Normalizes each well-formed run of `text` and keeps the bytes between them
// as they are (ICU would turn them into U+FFFD).
std::string NormalizeUnicode(const icu::Normalizer2& form,
                             std::string_view text) {
  std::string out;
  out.reserve(text.size());
  size_t run_start = 0;
  size_t pos = 0;
  while (pos < text.size()) {
    if (static_cast<unsigned char>(text[pos]) < 0x80) {
      ++pos;
      continue;
    }
    char32_t cp;
    const size_t len = NextChar(text, pos, &cp);
    if (cp != kInvalidChar) {
      pos += len;
      continue;
    }
    AppendNormalizedRun(form, text.substr(run_start, pos - run_start), &out);
    out.push_back(text[pos]);
    run_start = ++pos;
  }
  AppendNormalizedRun(form, text.substr(run_start), &out);
  return out;
}

}  // namespace

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
  RETURN_IF_ERROR(TypeOf(value, where, &type));
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
  absl::StatusOr<const icu::Normalizer2*> form =
      UnicodeForm(type, absl::StrCat(where, ".type"));
  if (!form.ok()) return form.status();
  Step step;
  if (*form != nullptr) {
    step.kind = Step::kUnicode;
    step.form = *form;
  } else if (type == "Prepend") {
    step.kind = Step::kPrepend;
    RETURN_IF_ERROR(RequiredString(value, "prepend", where, &step.content));
  } else if (type == "Replace") {
    step.kind = Step::kReplace;
    RETURN_IF_ERROR(ParseStringPattern(value, where, &step.pattern));
    RETURN_IF_ERROR(RequiredString(value, "content", where, &step.content));
  } else {
    return FieldError(
        absl::StrCat(where, ".type"),
        absl::StrCat("unsupported normalizer \"", type,
                     "\" (supported: Sequence, Prepend, Replace, NFC, NFD, "
                     "NFKC, NFKD)"));
  }
  steps->push_back(std::move(step));
  return absl::OkStatus();
}

absl::StatusOr<Normalizer> Normalizer::Parse(const json& value,
                                             const std::string& where) {
  Normalizer n;
  RETURN_IF_ERROR(ParseInto(value, where, &n.steps_));
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
      case Step::kUnicode:
        out = NormalizeUnicode(*step.form, out);
        break;
    }
  }
  return out;
}

}  // namespace seqboat
