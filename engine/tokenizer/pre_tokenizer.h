// tokenizer.json's "pre_tokenizer": splits normalized text into the words
// that BPE merges never cross. Supported:
//   ByteLevel  {add_prefix_space, use_regex}: the GPT-2 regex split, then
//              GPT-2's byte -> character mapping.
//   Split      {pattern: Regex | String, behavior: "Isolated", invert: false}
//   Metaspace  {replacement, prepend_scheme: always | first | never, split}
//   WhitespaceSplit  words between runs of Unicode White_Space, which is
//              dropped (the word-level models of fairseq dictionaries)
//   Sequence   of the above (Llama 3: Split + ByteLevel without regex).
// RE2 has no lookaround. The GPT-2 family's `\s+(?!\S)|\s+` tail is handled
// by hand (a whitespace run followed by a non-space gives back its last
// character); any other lookaround is rejected naming the field. `\s` and
// `\S` are rewritten to Unicode White_Space, as Oniguruma (used by Hugging
// Face) reads them; RE2's own `\s` is ASCII only.
#ifndef SEQBOAT_ENGINE_TOKENIZER_PRE_TOKENIZER_H_
#define SEQBOAT_ENGINE_TOKENIZER_PRE_TOKENIZER_H_

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "nlohmann/json.hpp"
#include "re2/re2.h"

namespace seqboat {

// One regex split with the lookahead tail emulated; exposed for tests.
class RegexSplitter {
 public:
  // `pattern` uses Hugging Face (Oniguruma) syntax; errors name `where`.
  static absl::StatusOr<std::unique_ptr<RegexSplitter>> Create(
      std::string_view pattern, const std::string& where);

  // Appends the matches and the text between them (behavior "Isolated"), in
  // order, to *out; they concatenate back to `text`.
  void Split(std::string_view text, std::vector<std::string_view>* out) const;

 private:
  RegexSplitter() = default;
  std::unique_ptr<RE2> re_;
  int ws_group_ = -1;  // capture index of the emulated `\s+(?!\S)|\s+`
};

class PreTokenizer {
 public:
  // `value` is the "pre_tokenizer" field (null allowed); `where` its path.
  static absl::StatusOr<std::unique_ptr<PreTokenizer>> Parse(
      const nlohmann::json& value, const std::string& where);

  // Splits one normalized segment. `at_text_start`: the segment begins the
  // input (Metaspace's prepend_scheme "first" depends on it).
  void Split(std::string_view text, bool at_text_start,
             std::vector<std::string>* words) const;

 private:
  struct Piece {
    std::string text;
    bool at_start;
  };
  struct Step {
    enum Kind { kSplit, kByteLevel, kMetaspace, kWhitespaceSplit } kind;
    std::unique_ptr<RegexSplitter> splitter;  // kSplit; kByteLevel with regex
    bool add_prefix_space = false;            // kByteLevel
    std::string replacement;                  // kMetaspace
    enum Prepend { kAlways, kFirst, kNever } prepend = kAlways;
    bool split = true;  // kMetaspace
  };
  static absl::Status ParseInto(const nlohmann::json& value,
                                const std::string& where,
                                std::vector<Step>* steps);
  static void Apply(const Step& step, std::vector<Piece>* pieces);

  std::vector<Step> steps_;
};

}  // namespace seqboat

#endif  // SEQBOAT_ENGINE_TOKENIZER_PRE_TOKENIZER_H_
