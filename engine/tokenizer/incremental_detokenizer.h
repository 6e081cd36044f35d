// Turns a stream of token ids into a stream of complete UTF-8 text. A token
// may carry part of a multi-byte character; those bytes are held back until
// the character completes (or turns out invalid, then it becomes U+FFFD).
// Special tokens (EOS and friends) produce no text. Invariant: the
// concatenation of every Push() plus Flush() equals Utf8Lossy() of all the
// non-special tokens' bytes (the first of them as DecodeToken(id, true) when
// the stream starts the text). One instance per request; not thread-safe.
#ifndef SEQBOAT_ENGINE_TOKENIZER_INCREMENTAL_DETOKENIZER_H_
#define SEQBOAT_ENGINE_TOKENIZER_INCREMENTAL_DETOKENIZER_H_

#include <cstdint>
#include <string>

#include "engine/tokenizer/tokenizer.h"

namespace seqboat {

class IncrementalDetokenizer {
 public:
  // `tokenizer` must outlive this object. `at_text_start`: the tokens begin
  // the text, so the first one drops the leading space a SentencePiece-style
  // decoder strips. Leave it false when streaming a continuation of a
  // prompt: there "▁world" after "Hello" is " world".
  explicit IncrementalDetokenizer(const Tokenizer& tokenizer,
                                  bool at_text_start = false)
      : tokenizer_(tokenizer), at_text_start_(at_text_start) {}

  // Returns the text completed by this token (possibly empty).
  std::string Push(int32_t id);
  // Ends the stream: returns the held-back bytes, incomplete ones as U+FFFD.
  std::string Flush();

 private:
  const Tokenizer& tokenizer_;
  bool at_text_start_;
  std::string pending_;  // bytes of an unfinished character, at most 3
};

}  // namespace seqboat

#endif  // SEQBOAT_ENGINE_TOKENIZER_INCREMENTAL_DETOKENIZER_H_
