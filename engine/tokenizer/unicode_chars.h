// Code-point level helpers for the tokenizer pipeline: walking UTF-8 text one
// character at a time (tolerating invalid bytes, which user text may hold)
// and the Unicode White_Space property that Hugging Face's
// `char::is_whitespace` and Oniguruma's `\s` both use.
#ifndef SEQBOAT_ENGINE_TOKENIZER_UNICODE_CHARS_H_
#define SEQBOAT_ENGINE_TOKENIZER_UNICODE_CHARS_H_

#include <cstddef>
#include <string>
#include <string_view>

namespace seqboat {

// Marks a byte that does not start a well-formed UTF-8 character.
inline constexpr char32_t kInvalidChar = 0xFFFFFFFF;

// Decodes the character starting at text[pos] (pos < text.size()) into *cp
// and returns its length in bytes. A byte that does not begin a well-formed
// sequence is a character of its own: length 1, *cp = kInvalidChar.
size_t NextChar(std::string_view text, size_t pos, char32_t* cp);

// The length of the character that ends at text[end - 1] (end > 0); 1 when
// the bytes before `end` are not a well-formed character.
size_t PrevCharLength(std::string_view text, size_t end);

// Unicode's White_Space property (Unicode 15 list).
bool IsUnicodeWhitespace(char32_t cp);

void AppendUtf8(char32_t cp, std::string* out);

}  // namespace seqboat

#endif  // SEQBOAT_ENGINE_TOKENIZER_UNICODE_CHARS_H_
