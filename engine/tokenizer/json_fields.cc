#include "engine/tokenizer/json_fields.h"

#include "absl/strings/str_cat.h"

namespace seqboat {

using json = nlohmann::json;

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
