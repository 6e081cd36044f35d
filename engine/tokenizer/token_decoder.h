// tokenizer.json's "decoder", turned into per-token bytes so text can be
// streamed token by token. Supported steps (alone or in a Sequence):
//   ByteLevel            GPT-2 characters back to bytes
//   Replace              literal pattern (e.g. "▁" -> " ")
//   ByteFallback         "<0xXX>" tokens become the byte XX
//   Fuse                 joins tokens; a no-op for a byte stream
//   Strip                before Fuse: per token; after Fuse: only
//                        {content " ", start <= 1, stop 0}, which removes one
//                        leading space from the start of the text
//   Metaspace            "▁" -> " ", dropped from the first token
// A null decoder makes Hugging Face join the tokens with spaces: accepted
// only where the caller asks for it (word-level models, whose tokens are
// whole words); other decoders are rejected naming the field.
#ifndef SEQBOAT_ENGINE_TOKENIZER_TOKEN_DECODER_H_
#define SEQBOAT_ENGINE_TOKENIZER_TOKEN_DECODER_H_

#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "nlohmann/json.hpp"

namespace seqboat {

class TokenDecoder {
 public:
  // null_joins_words: a null `value` is Hugging Face's join with spaces
  // (each token but the text's first gets a leading space) instead of an
  // error.
  static absl::StatusOr<TokenDecoder> Parse(const nlohmann::json& value,
                                            const std::string& where,
                                            bool null_joins_words = false);

  // The bytes `token` (a vocabulary or added-token string) contributes to
  // the text; `at_text_start`: it is the first non-special token of the text.
  std::string Decode(std::string_view token, bool at_text_start) const;

 private:
  struct Step {
    enum Kind {
      kByteLevel,
      kReplace,
      kByteFallback,
      kStrip,
      kStripStart,
      kMetaspace,
      kJoinWords
    } kind;
    std::string pattern;     // kReplace; kMetaspace: the replacement character
    std::string content;     // kReplace
    int start = 0;           // kStrip
    int stop = 0;            // kStrip
    bool drop_first = true;  // kMetaspace: prepend_scheme is not "never"
  };
  static absl::Status ParseInto(const nlohmann::json& value,
                                const std::string& where, bool* fused,
                                std::vector<Step>* steps);

  std::vector<Step> steps_;
};

}  // namespace seqboat

#endif  // SEQBOAT_ENGINE_TOKENIZER_TOKEN_DECODER_H_
