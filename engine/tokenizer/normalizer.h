// tokenizer.json's "normalizer": the text rewrites applied to each piece of
// input between added tokens, before pre-tokenization. Supported: null,
// Prepend, Replace with a literal pattern, the Unicode normalization forms
// NFC, NFD, NFKC and NFKD (ICU), and Sequence of those, applied in order.
// Anything else (regex Replace, Lowercase, Strip, BertNormalizer, ...) is
// rejected with an error naming the field, because applying it inexactly
// would silently change ids.
//
// Unicode forms and invalid UTF-8: the bytes that are not part of a
// well-formed character are kept as they are, and each well-formed run
// between them is normalized on its own. Bad bytes therefore reach the
// pre-tokenizer and model exactly as with no normalizer (byte-level BPE and
// byte fallback encode them as bytes) instead of becoming U+FFFD.
// Hugging Face `tokenizers` 0.21 normalizes with Unicode 13 tables, ICU with
// newer ones (Unicode 15 in Debian 12's ICU 72): characters assigned after
// Unicode 13 that have decompositions or combining classes can normalize,
// and so encode, differently.
#ifndef SEQBOAT_ENGINE_TOKENIZER_NORMALIZER_H_
#define SEQBOAT_ENGINE_TOKENIZER_NORMALIZER_H_

#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "nlohmann/json.hpp"
#include "unicode/uversion.h"

U_NAMESPACE_BEGIN
class Normalizer2;
U_NAMESPACE_END

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
    enum Kind { kPrepend, kReplace, kUnicode } kind;
    std::string pattern;  // kReplace: the literal text to replace
    std::string content;  // kPrepend: the prefix; kReplace: the replacement
    // kUnicode: ICU's shared instance for the form (owned by ICU, never
    // freed, safe to use from many threads).
    const icu::Normalizer2* form = nullptr;
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
