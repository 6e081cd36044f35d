// Typed reading of JSON objects with errors that name the file, the place and
// the field: "<source>: <context>: field "<key>" must be ..., got ...". Keys
// that no one asked for can be reported afterwards as unknown. config.json's
// parser is built on ObjectReader; tokenizer.json's on the path-named reads
// below, whose errors name the field by its path ("model.merges[3]").
#ifndef SEQBOAT_BASE_JSON_READER_H_
#define SEQBOAT_BASE_JSON_READER_H_

#include <cstdint>
#include <functional>
#include <limits>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"

namespace seqboat {

// Sizes beyond this are corruption, and keeping them in int32 range keeps
// products of two sizes inside int64 everywhere downstream.
inline constexpr int64_t kMaxJsonSize = std::numeric_limits<int32_t>::max();

// The first 40 bytes of a value's JSON text, for error messages, cut short
// at a character boundary. Only that much of the value is serialized, so its
// size and depth do not matter.
std::string BriefJson(const nlohmann::json& value);

// Arrays and objects nested deeper than this are refused. Real config.json,
// tokenizer.json and safetensors headers nest a few levels; the readers
// follow the nesting by recursion (a tokenizer's Sequence of Sequences), so
// an unbounded depth would let a small file exhaust the stack.
inline constexpr int kMaxJsonDepth = 64;

// InvalidArgument when `text` nests arrays and objects deeper than
// kMaxJsonDepth (brackets inside strings do not count). Checked before
// parsing; the text need not be valid JSON.
absl::Status CheckJsonDepth(std::string_view text);

// Parses `text`, rejecting a key repeated within one object (nlohmann keeps
// the last silently, which would hide a conflicting value) and nesting past
// kMaxJsonDepth. Errors name `source`.
absl::Status ParseJson(std::string_view text, const std::string& source,
                       nlohmann::json* out);

// Debian's Abseil is built without the std::string_view alias.
inline absl::string_view AbslView(std::string_view s) {
  return absl::string_view(s.data(), s.size());
}

// Reads the fields of one JSON object (which must outlive the reader),
// remembering which keys were asked for.
class ObjectReader {
 public:
  ObjectReader(const nlohmann::json& object, std::string source,
               std::string context);

  const std::string& context() const { return context_; }
  const std::string& source() const { return source_; }

  // The value, or nullptr when absent. Marks the key as known.
  const nlohmann::json* Get(const char* key);

  absl::Status Error(const char* key, absl::string_view problem) const;
  absl::Status Invalid(const char* key, absl::string_view expected,
                       const nlohmann::json& got) const;
  absl::Status Missing(const char* key, absl::string_view expected) const;
  // For failures that are not about one field.
  absl::Status Fail(absl::string_view problem) const;

  // An integer in [1, kMaxJsonSize].
  absl::Status PositiveInt(const char* key, int64_t* out);
  absl::Status Bool(const char* key, bool* out);
  absl::Status OptionalBool(const char* key, bool fallback, bool* out);
  // A finite number > 0; OptionalPositiveNumber gives `fallback` when absent.
  absl::Status PositiveNumber(const char* key, double* out);
  absl::Status OptionalPositiveNumber(const char* key, double fallback,
                                      double* out);
  absl::Status String(const char* key, std::string* out);
  // An integer in [0, limit), or null / absent (nullopt).
  absl::Status OptionalIndex(const char* key, int64_t limit,
                             absl::string_view limit_name,
                             std::optional<int64_t>* out);

  // Warnings for every key nobody asked for.
  void ReportUnknown(std::vector<std::string>* warnings) const;

 private:
  std::string Prefix() const;
  absl::Status CheckPositiveInt(const char* key, const nlohmann::json& v,
                                int64_t* out) const;
  absl::Status CheckPositiveNumber(const char* key, const nlohmann::json& v,
                                   double* out) const;

  const nlohmann::json& object_;
  std::string source_;
  std::string context_;
  std::set<std::string, std::less<>> known_;
};

// --- path-named reads (tokenizer.json) ---------------------------------------

// "where: message" as an InvalidArgument error.
absl::Status FieldError(const std::string& where, const std::string& message);

// Absent or null: *out keeps its value. Wrong type: error naming where.key.
absl::Status OptionalBool(const nlohmann::json& obj, const char* key,
                          const std::string& where, bool* out);
absl::Status OptionalString(const nlohmann::json& obj, const char* key,
                            const std::string& where, std::string* out);
// Present and of the right type, or an error naming where.key.
absl::Status RequiredString(const nlohmann::json& obj, const char* key,
                            const std::string& where, std::string* out);
// An integer within [lo, hi].
absl::Status RequiredInt(const nlohmann::json& obj, const char* key,
                         const std::string& where, int64_t lo, int64_t hi,
                         int64_t* out);
// The object's "type" string, or an error naming where.type.
absl::Status TypeOf(const nlohmann::json& obj, const std::string& where,
                    std::string* out);

// Reads a json integer into [lo, hi] without wrapping huge values.
bool IntInRange(const nlohmann::json& value, int64_t lo, int64_t hi,
                int64_t* out);

}  // namespace seqboat

#endif  // SEQBOAT_BASE_JSON_READER_H_
