#include "server/openai_request_fields.h"

#include <iterator>
#include <limits>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "base/json_reader.h"

namespace seqboat::openai {

OpenAiError Invalid(std::string param, std::string message, std::string code) {
  OpenAiError e;
  e.http_status = 400;
  e.message = std::move(message);
  e.param = std::move(param);
  e.code = std::move(code);
  return e;
}

OpenAiError Unsupported(const std::string& param, const std::string& message) {
  return Invalid(param, message, "unsupported_value");
}

const ParameterSet* WithShared(std::initializer_list<const char*> own) {
  auto* known = new ParameterSet(own.begin(), own.end());
  known->insert(std::begin(kSharedParameters), std::end(kSharedParameters));
  return known;
}

std::optional<OpenAiError> ReadBody(std::string_view body,
                                    const ParameterSet& known, json* out) {
  if (absl::Status s = ParseJson(body, "the request body", out); !s.ok()) {
    return Invalid("", std::string(s.message()));
  }
  if (!out->is_object()) {
    return Invalid("", "the request body must be a JSON object");
  }
  for (const auto& [key, value] : out->items()) {
    if (known.count(key) == 0) {
      return Invalid(
          key, absl::StrCat("Unrecognized request argument supplied: ", key),
          "unknown_parameter");
    }
  }
  return std::nullopt;
}

bool IsOpenAiName(const std::string& name) {
  if (name.empty() || name.size() > 64) return false;
  for (char c : name) {
    const bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
                    (c >= '0' && c <= '9') || c == '_' || c == '-';
    if (!ok) return false;
  }
  return true;
}

bool Int64Of(const json& v, int64_t* out) {
  if (v.is_number_unsigned()) {
    const uint64_t u = v.get<uint64_t>();
    if (u > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
      return false;
    }
    *out = static_cast<int64_t>(u);
    return true;
  }
  if (v.is_number_integer()) {
    *out = v.get<int64_t>();
    return true;
  }
  return false;
}

const json* Field(const json& body, const char* key) {
  auto it = body.find(key);
  if (it == body.end() || it->is_null()) return nullptr;
  return &*it;
}

std::optional<OpenAiError> ReadNumber(const json& body, const char* key,
                                      std::optional<double>* out) {
  const json* v = Field(body, key);
  if (v == nullptr) return std::nullopt;
  if (!v->is_number()) {
    return Invalid(key,
                   absl::StrCat(key, " must be a number, got ", BriefJson(*v)));
  }
  *out = v->get<double>();
  return std::nullopt;
}

std::optional<OpenAiError> ReadBool(const json& body, const char* key,
                                    bool* out) {
  const json* v = Field(body, key);
  if (v == nullptr) return std::nullopt;
  if (!v->is_boolean()) {
    return Invalid(
        key, absl::StrCat(key, " must be a boolean, got ", BriefJson(*v)));
  }
  *out = v->get<bool>();
  return std::nullopt;
}

std::optional<OpenAiError> ReadInt(const json& body, const char* key,
                                   std::optional<int64_t>* out) {
  const json* v = Field(body, key);
  if (v == nullptr) return std::nullopt;
  int64_t value = 0;
  if (!Int64Of(*v, &value)) {
    return Invalid(
        key, absl::StrCat(key, " must be an integer, got ", BriefJson(*v)));
  }
  *out = value;
  return std::nullopt;
}

std::optional<OpenAiError> ReadIds(const json& array, const std::string& name,
                                   std::vector<int32_t>* out) {
  for (size_t i = 0; i < array.size(); ++i) {
    int64_t id = 0;
    if (!Int64Of(array[i], &id) || id < std::numeric_limits<int32_t>::min() ||
        id > std::numeric_limits<int32_t>::max()) {
      return Invalid(name, absl::StrCat(name, "[", i,
                                        "] must be an integer token id, got ",
                                        BriefJson(array[i])));
    }
    out->push_back(static_cast<int32_t>(id));
  }
  return std::nullopt;
}

}  // namespace seqboat::openai
