#include "fuzz/tokenizer_checks.h"

#include <limits>

#include "engine/tokenizer/incremental_detokenizer.h"
#include "engine/tokenizer/utf8.h"
#include "fuzz/fuzz_check.h"

namespace seqboat::fuzz {

bool IsValidUtf8(std::string_view text) { return Utf8Lossy(text) == text; }

std::vector<int32_t> CheckedEncode(const Tokenizer& tokenizer,
                                   std::string_view text) {
  std::vector<int32_t> ids = tokenizer.Encode(text);
  for (int32_t id : ids) {
    FUZZ_CHECK(id >= 0 && id < tokenizer.vocab_size(), "id %d of %d", id,
               tokenizer.vocab_size());
  }
  return ids;
}

void CheckUndefinedIds(const Tokenizer& tokenizer) {
  for (int32_t id :
       {-1, std::numeric_limits<int32_t>::min(), tokenizer.vocab_size(),
        std::numeric_limits<int32_t>::max()}) {
    FUZZ_CHECK(tokenizer.TokenBytes(id).empty(), "id %d", id);
    FUZZ_CHECK(tokenizer.DecodeToken(id, true).empty(), "id %d", id);
    FUZZ_CHECK(!tokenizer.IsSpecial(id), "id %d", id);
  }
  const int32_t eos = tokenizer.eos_token_id();
  FUZZ_CHECK(eos >= -1 && eos < tokenizer.vocab_size(), "eos %d", eos);
}

std::string CheckedDetokenize(const Tokenizer& tokenizer,
                              const std::vector<int32_t>& ids,
                              bool at_text_start) {
  IncrementalDetokenizer detokenizer(tokenizer, at_text_start);
  std::string streamed;
  std::string bytes;
  bool first = at_text_start;
  for (int32_t id : ids) {
    const std::string piece = detokenizer.Push(id);
    FUZZ_CHECK(IsValidUtf8(piece), "id %d", id);
    streamed += piece;
    if (tokenizer.IsSpecial(id)) continue;
    bytes += tokenizer.DecodeToken(id, first);
    first = false;
  }
  const std::string rest = detokenizer.Flush();
  FUZZ_CHECK(IsValidUtf8(rest));
  streamed += rest;
  FUZZ_CHECK(streamed == Utf8Lossy(bytes));
  return streamed;
}

}  // namespace seqboat::fuzz
