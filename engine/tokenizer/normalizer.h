// tokenizer.json's "normalizer": the text rewrites applied to each piece of
// input between added tokens, before pre-tokenization. Supported: null,
// Prepend, Replace with a literal pattern, and Sequence of those (what the
// Llama/Mistral SentencePiece conversions use). Unicode normalization forms
// (NFC, NFKC, ...) and regex replacements are rejected with an error naming
// the field, because applying them inexactly would silently change ids.
#ifndef SEQBOAT_ENGINE_TOKENIZER_NORMALIZER_H_
#define SEQBOAT_ENGINE_TOKENIZER_NORMALIZER_H_

#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "nlohmann/json.hpp"

namespace seqboat {

class Normalizer {
 public:
  // `value` is the "normalizer" field (null allowed); `where` its path.
  static absl::StatusOr<Normalizer> Parse(const nlohmann::json& value,
                                          const std::string& where);

  bool empty() const { return steps_.empty(); }
  std::string Normalize(std::string_view text) const;

 private:
  struct Step {
    enum Kind { kPrepend, kReplace } kind;
    std::string pattern;  // kReplace: the literal text to replace
    std::string content;  // kPrepend: the prefix; kReplace: the replacement
  };
  static absl::Status ParseInto(const nlohmann::json& value,
                                const std::string& where,
                                std::vector<Step>* steps);

  std::vector<Step> steps_;
};

// Reads a {"String": s} pattern (Replace normalizer and decoder). Regex
// patterns are rejected naming where.pattern.
absl::Status ParseStringPattern(const nlohmann::json& obj,
                                const std::string& where, std::string* out);

// Replaces every non-overlapping occurrence of `pattern` (non-empty), left to
// right.
std::string ReplaceAll(std::string_view text, std::string_view pattern,
                       std::string_view content);

}  // namespace seqboat

#endif  // SEQBOAT_ENGINE_TOKENIZER_NORMALIZER_H_
