#include "engine/tokenizer/unicode_chars.h"

#include <cstdint>

namespace seqboat {

size_t NextChar(std::string_view text, size_t pos, char32_t* cp) {
  const uint8_t b0 = static_cast<uint8_t>(text[pos]);
  if (b0 < 0x80) {
    *cp = b0;
    return 1;
  }
  size_t len = 0;
  char32_t value = 0;
  char32_t min_value = 0;
  if (b0 >= 0xC2 && b0 <= 0xDF) {
    len = 2;
    value = b0 & 0x1F;
    min_value = 0x80;
  } else if (b0 >= 0xE0 && b0 <= 0xEF) {
    len = 3;
    value = b0 & 0x0F;
    min_value = 0x800;
  } else if (b0 >= 0xF0 && b0 <= 0xF4) {
    len = 4;
    value = b0 & 0x07;
    min_value = 0x10000;
  } else {
    *cp = kInvalidChar;
    return 1;
  }
  if (pos + len > text.size()) {
    *cp = kInvalidChar;
    return 1;
  }
  for (size_t i = 1; i < len; ++i) {
    const uint8_t b = static_cast<uint8_t>(text[pos + i]);
    if ((b & 0xC0) != 0x80) {
      *cp = kInvalidChar;
      return 1;
    }
    value = (value << 6) | (b & 0x3F);
  }
  // Overlong forms, surrogates and values past U+10FFFF are not characters.
  if (value < min_value || value > 0x10FFFF ||
      (value >= 0xD800 && value <= 0xDFFF)) {
    *cp = kInvalidChar;
    return 1;
  }
  *cp = value;
  return len;
}

size_t PrevCharLength(std::string_view text, size_t end) {
  for (size_t len = 2; len <= 4 && len <= end; ++len) {
    char32_t cp;
    if (NextChar(text, end - len, &cp) == len) return len;
  }
  return 1;
}

bool IsUnicodeWhitespace(char32_t cp) {
  if (cp >= 0x09 && cp <= 0x0D) return true;
  switch (cp) {
    case 0x20:
    case 0x85:
    case 0xA0:
    case 0x1680:
    case 0x2028:
    case 0x2029:
    case 0x202F:
    case 0x205F:
    case 0x3000:
      return true;
    default:
      return cp >= 0x2000 && cp <= 0x200A;
  }
}

void AppendUtf8(char32_t cp, std::string* out) {
  if (cp < 0x80) {
    out->push_back(static_cast<char>(cp));
  } else if (cp < 0x800) {
    out->push_back(static_cast<char>(0xC0 | (cp >> 6)));
    out->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else if (cp < 0x10000) {
    out->push_back(static_cast<char>(0xE0 | (cp >> 12)));
    out->push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else {
    out->push_back(static_cast<char>(0xF0 | (cp >> 18)));
    out->push_back(static_cast<char>(0x80 | ((cp >> 12) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  }
}

}  // namespace seqboat
