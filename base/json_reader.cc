#include "base/json_reader.h"

#include <cmath>
#include <utility>

#include "absl/strings/str_cat.h"

namespace seqboat {

using nlohmann::json;

namespace {

constexpr size_t kBriefChars = 40;

// Appends value.dump() to *out, or a prefix of it once *out is longer than
// `limit`. Each level appends a character before descending, so the
// recursion stops within `limit` levels whatever the value's depth.
void AppendJsonPrefix(const json& value, size_t limit, std::string* out) {
  if (out->size() > limit) return;
  if (value.is_array()) {
    out->push_back('[');
    for (auto it = value.begin(); it != value.end() && out->size() <= limit;
         ++it) {
      if (it != value.begin()) out->push_back(',');
      AppendJsonPrefix(*it, limit, out);
    }
    out->push_back(']');
  } else if (value.is_object()) {
    out->push_back('{');
    for (auto it = value.begin(); it != value.end() && out->size() <= limit;
         ++it) {
      if (it != value.begin()) out->push_back(',');
      *out += json(it.key()).dump();
      out->push_back(':');
      AppendJsonPrefix(it.value(), limit, out);
    }
    out->push_back('}');
  } else if (value.is_string() &&
             value.get_ref<const std::string&>().size() > limit) {
    // A cut may split a character; the replace handler keeps dump() from
    // throwing on it.
    *out += json(value.get_ref<const std::string&>().substr(0, limit + 1))
                .dump(-1, ' ', false, json::error_handler_t::replace);
  } else {
    *out += value.dump();
  }
}

}  // namespace

std::string BriefJson(const json& value) {
  std::string text;
  AppendJsonPrefix(value, kBriefChars, &text);
  if (text.size() > kBriefChars) {
    // Cut before a character, not inside one: the brief ends up in messages
    // that must be valid UTF-8 (an OpenAI error body).
    size_t cut = kBriefChars - 3;
    while (cut > 0 && (static_cast<unsigned char>(text[cut]) & 0xC0) == 0x80) {
      --cut;
    }
    text = text.substr(0, cut) + "...";
  }
  return text;
}

absl::Status CheckJsonDepth(std::string_view text) {
  int depth = 0;
  bool in_string = false;
  for (size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (in_string) {
      if (c == '\\') {
        ++i;  // the escaped character, which may be a quote
      } else if (c == '"') {
        in_string = false;
      }
    } else if (c == '"') {
      in_string = true;
    } else if (c == '[' || c == '{') {
      if (++depth > kMaxJsonDepth) {
        return absl::InvalidArgumentError(absl::StrCat(
            "arrays and objects nest deeper than ", kMaxJsonDepth, " levels"));
      }
    } else if ((c == ']' || c == '}') && depth > 0) {
      --depth;
    }
  }
  return absl::OkStatus();
}

ObjectReader::ObjectReader(const json& object, std::string source,
                           std::string context)
    : object_(object),
      source_(std::move(source)),
      context_(std::move(context)) {}

const json* ObjectReader::Get(const char* key) {
  known_.insert(key);
  auto it = object_.find(key);
  return it == object_.end() ? nullptr : &*it;
}

absl::Status ObjectReader::Error(const char* key,
                                 absl::string_view problem) const {
  return absl::InvalidArgumentError(
      absl::StrCat(Prefix(), "field \"", key, "\" ", problem));
}

absl::Status ObjectReader::Invalid(const char* key, absl::string_view expected,
                                   const json& got) const {
  return Error(key,
               absl::StrCat("must be ", expected, ", got ", BriefJson(got)));
}

absl::Status ObjectReader::Missing(const char* key,
                                   absl::string_view expected) const {
  return absl::InvalidArgumentError(
      absl::StrCat(Prefix(), "missing field \"", key, "\" (", expected, ")"));
}

absl::Status ObjectReader::Fail(absl::string_view problem) const {
  return absl::InvalidArgumentError(absl::StrCat(Prefix(), problem));
}

absl::Status ObjectReader::PositiveInt(const char* key, int64_t* out) {
  const json* v = Get(key);
  if (v == nullptr) return Missing(key, "a positive integer");
  return CheckPositiveInt(key, *v, out);
}

absl::Status ObjectReader::Bool(const char* key, bool* out) {
  const json* v = Get(key);
  if (v == nullptr) return Missing(key, "true or false");
  if (!v->is_boolean()) return Invalid(key, "true or false", *v);
  *out = v->get<bool>();
  return absl::OkStatus();
}

absl::Status ObjectReader::OptionalBool(const char* key, bool fallback,
                                        bool* out) {
  const json* v = Get(key);
  if (v == nullptr) {
    *out = fallback;
    return absl::OkStatus();
  }
  return Bool(key, out);
}

absl::Status ObjectReader::OptionalPositiveNumber(const char* key,
                                                  double fallback,
                                                  double* out) {
  const json* v = Get(key);
  if (v == nullptr) {
    *out = fallback;
    return absl::OkStatus();
  }
  return CheckPositiveNumber(key, *v, out);
}

absl::Status ObjectReader::PositiveNumber(const char* key, double* out) {
  const json* v = Get(key);
  if (v == nullptr) return Missing(key, "a positive number");
  return CheckPositiveNumber(key, *v, out);
}

absl::Status ObjectReader::String(const char* key, std::string* out) {
  const json* v = Get(key);
  if (v == nullptr) return Missing(key, "a string");
  if (!v->is_string()) return Invalid(key, "a string", *v);
  *out = v->get<std::string>();
  return absl::OkStatus();
}

absl::Status ObjectReader::OptionalIndex(const char* key, int64_t limit,
                                         absl::string_view limit_name,
                                         std::optional<int64_t>* out) {
  const json* v = Get(key);
  out->reset();
  if (v == nullptr || v->is_null()) return absl::OkStatus();
  const std::string expected =
      absl::StrCat("null or an integer in [0, ", limit_name, " = ", limit, ")");
  if (!v->is_number_integer()) return Invalid(key, expected, *v);
  if (v->is_number_unsigned()
          ? v->get<uint64_t>() >= static_cast<uint64_t>(limit)
          : (v->get<int64_t>() < 0 || v->get<int64_t>() >= limit)) {
    return Invalid(key, expected, *v);
  }
  *out = v->get<int64_t>();
  return absl::OkStatus();
}

void ObjectReader::ReportUnknown(std::vector<std::string>* warnings) const {
  for (auto it = object_.begin(); it != object_.end(); ++it) {
    if (known_.count(it.key()) == 0) {
      warnings->push_back(absl::StrCat(context_.empty() ? "" : context_ + ": ",
                                       "unknown field \"", it.key(), "\""));
    }
  }
}

std::string ObjectReader::Prefix() const {
  return absl::StrCat(source_, ": ", context_.empty() ? "" : context_ + ": ");
}

absl::Status ObjectReader::CheckPositiveInt(const char* key, const json& v,
                                            int64_t* out) const {
  if (!v.is_number_integer() ||
      (v.is_number_integer() && !v.is_number_unsigned() &&
       v.get<int64_t>() <= 0) ||
      (v.is_number_unsigned() && v.get<uint64_t>() == 0)) {
    return Invalid(key, "a positive integer", v);
  }
  if (v.get<uint64_t>() > static_cast<uint64_t>(kMaxJsonSize)) {
    return Invalid(key, absl::StrCat("at most ", kMaxJsonSize), v);
  }
  *out = v.get<int64_t>();
  return absl::OkStatus();
}

absl::Status ObjectReader::CheckPositiveNumber(const char* key, const json& v,
                                               double* out) const {
  if (!v.is_number() || !std::isfinite(v.get<double>()) ||
      v.get<double>() <= 0) {
    return Invalid(key, "a positive finite number", v);
  }
  *out = v.get<double>();
  return absl::OkStatus();
}

// A stack of key sets, one per open object: nlohmann's callback sees keys
// in parse order.
absl::Status ParseJson(std::string_view text, const std::string& source,
                       json* out) {
  if (absl::Status depth = CheckJsonDepth(text); !depth.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat(source, ": ", depth.message()));
  }
  std::vector<std::set<std::string>> open_objects;
  std::string duplicate;
  json::parser_callback_t callback = [&](int /*depth*/,
                                         json::parse_event_t event,
                                         json& parsed) {
    if (event == json::parse_event_t::object_start) {
      open_objects.emplace_back();
    } else if (event == json::parse_event_t::object_end) {
      if (!open_objects.empty()) open_objects.pop_back();
    } else if (event == json::parse_event_t::key && !open_objects.empty() &&
               parsed.is_string() &&
               !open_objects.back().insert(parsed.get<std::string>()).second &&
               duplicate.empty()) {
      duplicate = parsed.get<std::string>();
    }
    return true;
  };
  *out = json::parse(text.begin(), text.end(), callback,
                     /*allow_exceptions=*/false);
  if (out->is_discarded()) {
    return absl::InvalidArgumentError(absl::StrCat(source, ": not valid JSON"));
  }
  if (!duplicate.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat(source, ": duplicate key \"", duplicate, "\""));
  }
  return absl::OkStatus();
}

absl::Status FieldError(const std::string& where, const std::string& message) {
  return absl::InvalidArgumentError(absl::StrCat(where, ": ", message));
}

absl::Status OptionalBool(const json& obj, const char* key,
                          const std::string& where, bool* out) {
  auto it = obj.find(key);
  if (it == obj.end() || it->is_null()) return absl::OkStatus();
  if (!it->is_boolean()) {
    return FieldError(absl::StrCat(where, ".", key), "must be a boolean");
  }
  *out = it->get<bool>();
  return absl::OkStatus();
}

absl::Status OptionalString(const json& obj, const char* key,
                            const std::string& where, std::string* out) {
  auto it = obj.find(key);
  if (it == obj.end() || it->is_null()) return absl::OkStatus();
  if (!it->is_string()) {
    return FieldError(absl::StrCat(where, ".", key), "must be a string");
  }
  *out = it->get<std::string>();
  return absl::OkStatus();
}

absl::Status RequiredString(const json& obj, const char* key,
                            const std::string& where, std::string* out) {
  auto it = obj.find(key);
  if (it == obj.end() || !it->is_string()) {
    return FieldError(absl::StrCat(where, ".", key), "must be a string");
  }
  *out = it->get<std::string>();
  return absl::OkStatus();
}

bool IntInRange(const json& value, int64_t lo, int64_t hi, int64_t* out) {
  if (!value.is_number_integer()) return false;
  if (value.is_number_unsigned()) {
    const uint64_t u = value.get<uint64_t>();
    if (hi < 0 || u > static_cast<uint64_t>(hi)) return false;
    *out = static_cast<int64_t>(u);
  } else {
    *out = value.get<int64_t>();
  }
  return *out >= lo && *out <= hi;
}

absl::Status RequiredInt(const json& obj, const char* key,
                         const std::string& where, int64_t lo, int64_t hi,
                         int64_t* out) {
  auto it = obj.find(key);
  if (it == obj.end() || !IntInRange(*it, lo, hi, out)) {
    return FieldError(
        absl::StrCat(where, ".", key),
        absl::StrCat("must be an integer in [", lo, ", ", hi, "]"));
  }
  return absl::OkStatus();
}

absl::Status TypeOf(const json& obj, const std::string& where,
                    std::string* out) {
  if (!obj.is_object()) return FieldError(where, "must be an object or null");
  return RequiredString(obj, "type", where, out);
}

}  // namespace seqboat
