// Turns a stream of token ids into a stream of complete UTF-8 text. A token
// may carry part of a multi-byte character; those bytes are held back until
// the character completes (or turns out invalid, then it becomes U+FFFD).
// Special tokens (EOS and friends) produce no text. Invariant: the
// concatenation of every Push() plus Flush() equals Utf8Lossy() of all the
// non-special tokens' bytes. One instance per request; not thread-safe.
#ifndef SEQBOAT_ENGINE_TOKENIZER_INCREMENTAL_DETOKENIZER_H_
#define SEQBOAT_ENGINE_TOKENIZER_INCREMENTAL_DETOKENIZER_H_

#include <cstdint>
#include <string>

#include "engine/tokenizer/tokenizer.h"

namespace seqboat {

class IncrementalDetokenizer {
 public:
  // `tokenizer` must outlive this object.
  explicit IncrementalDetokenizer(const Tokenizer& tokenizer)
      : tokenizer_(tokenizer) {}

  // Returns the text completed by this token (possibly empty).
  std::string Push(int32_t id);
  // Ends the stream: returns the held-back bytes, incomplete ones as U+FFFD.
  std::string Flush();

 private:
  const Tokenizer& tokenizer_;
  std::string pending_;  // bytes of an unfinished character, at most 3
};

}  // namespace seqboat

#endif  // SEQBOAT_ENGINE_TOKENIZER_INCREMENTAL_DETOKENIZER_H_
