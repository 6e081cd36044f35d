// Typed, non-throwing reads of tokenizer.json fields. Every error names the
// field by its path (e.g. "model.merges[3]") so a broken file is easy to fix.
#ifndef SEQBOAT_ENGINE_TOKENIZER_JSON_FIELDS_H_
#define SEQBOAT_ENGINE_TOKENIZER_JSON_FIELDS_H_

#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "nlohmann/json.hpp"

namespace seqboat {

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

#endif  // SEQBOAT_ENGINE_TOKENIZER_JSON_FIELDS_H_
