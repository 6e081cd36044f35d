// Checks of the Tokenizer contract (engine/tokenizer/tokenizer.h) and of the
// IncrementalDetokenizer's invariant, shared by the tokenizer fuzz targets.
// A violation aborts (FUZZ_CHECK).
#ifndef SEQBOAT_FUZZ_TOKENIZER_CHECKS_H_
#define SEQBOAT_FUZZ_TOKENIZER_CHECKS_H_

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "engine/tokenizer/tokenizer.h"

namespace seqboat::fuzz {

bool IsValidUtf8(std::string_view text);

// Encodes `text`; every id is one the tokenizer defines.
std::vector<int32_t> CheckedEncode(const Tokenizer& tokenizer,
                                   std::string_view text);

// Ids outside [0, vocab_size) are undefined: no bytes, not special.
void CheckUndefinedIds(const Tokenizer& tokenizer);

// Streams `ids` through an IncrementalDetokenizer: every piece is valid
// UTF-8, and together with Flush() they are Utf8Lossy of the tokens' bytes.
// Returns that text.
std::string CheckedDetokenize(const Tokenizer& tokenizer,
                              const std::vector<int32_t>& ids,
                              bool at_text_start);

}  // namespace seqboat::fuzz

#endif  // SEQBOAT_FUZZ_TOKENIZER_CHECKS_H_
