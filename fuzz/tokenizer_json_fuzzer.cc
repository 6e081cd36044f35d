// ParseTokenizerJson on arbitrary text, then the tokenizer it builds on a
// text. The input is a tokenizer.json, optionally followed by a NUL byte
// (which JSON text cannot hold), a flags byte and the text to encode; without
// one a fixed text with words, numbers, several scripts and special-token
// spellings is encoded. Either the file is refused with a status, or the
// tokenizer keeps the Tokenizer contract on that text.
#include <cstdint>
#include <cstring>
#include <string_view>

#include "engine/tokenizer/tokenizer.h"
#include "fuzz/fuzz_check.h"
#include "fuzz/tokenizer_checks.h"

namespace {

constexpr std::string_view kDefaultText =
    "Hello, world! It's 2024: 3.14 r\xC3\xA9sum\xC3\xA9 \xE6\x97\xA5\xE6\x9C"
    "\xAC\xE8\xAA\x9E \xF0\x9F\x98\x80  <|endoftext|></s><s> <note>[[x]]\n\t"
    "\xE2\x96\x81x the 72 101 \xC3\xA9\n";

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const char* begin = reinterpret_cast<const char*>(data);
  const char* nul = static_cast<const char*>(std::memchr(begin, 0, size));
  const std::string_view json(begin, nul ? nul - begin : size);
  std::string_view text = kDefaultText;
  uint8_t flags = 0;
  if (nul != nullptr && nul + 1 < begin + size) {
    flags = static_cast<uint8_t>(nul[1]);
    text = std::string_view(nul + 2, begin + size - (nul + 2));
  }
  seqboat::TokenizerOptions options;
  options.parse_special = (flags & 1) != 0;
  if (flags & 2) options.eos_token_id = flags >> 2;

  auto tokenizer = seqboat::ParseTokenizerJson(json, options);
  if (!tokenizer.ok()) {
    FUZZ_CHECK(!tokenizer.status().message().empty());
    return 0;
  }
  const seqboat::Tokenizer& t = **tokenizer;
  FUZZ_CHECK(t.vocab_size() > 0);
  seqboat::fuzz::CheckUndefinedIds(t);
  if (options.eos_token_id >= 0)
    FUZZ_CHECK(t.eos_token_id() == options.eos_token_id);
  const std::vector<int32_t> ids = seqboat::fuzz::CheckedEncode(t, text);
  seqboat::fuzz::CheckedDetokenize(t, ids, /*at_text_start=*/true);
  seqboat::fuzz::CheckedDetokenize(t, ids, /*at_text_start=*/false);
  return 0;
}
