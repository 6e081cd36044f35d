#include "engine/tokenizer/byte_level.h"

#include <array>
#include <cstdint>

#include "engine/tokenizer/unicode_chars.h"

namespace seqboat {
namespace {

// The byte each code point below 0x144 stands for (-1: none). GPT-2 keeps the
// printable Latin-1 bytes as themselves and moves the other 68 bytes to
// U+0100 upwards in byte order, so every mapped character is below U+0144.
constexpr char32_t kMappedLimit = 0x144;

struct Tables {
  std::array<std::string, 256> byte_to_text;
  std::array<int16_t, kMappedLimit> char_to_byte;
};

const Tables& GetTables() {
  static const Tables* const tables = [] {
    auto* t = new Tables();
    t->char_to_byte.fill(-1);
    char32_t next_unprintable = 0x100;
    for (int b = 0; b < 256; ++b) {
      const bool printable = (b >= 0x21 && b <= 0x7E) ||
                             (b >= 0xA1 && b <= 0xAC) ||
                             (b >= 0xAE && b <= 0xFF);
      const char32_t cp =
          printable ? static_cast<char32_t>(b) : next_unprintable++;
      AppendUtf8(cp, &t->byte_to_text[b]);
      t->char_to_byte[cp] = static_cast<int16_t>(b);
    }
    return t;
  }();
  return *tables;
}

}  // namespace

void ByteLevelEncode(std::string_view bytes, std::string* out) {
  const Tables& t = GetTables();
  for (char c : bytes) out->append(t.byte_to_text[static_cast<uint8_t>(c)]);
}

bool ByteLevelDecode(std::string_view text, std::string* out) {
  const Tables& t = GetTables();
  std::string bytes;
  bytes.reserve(text.size());
  for (size_t pos = 0; pos < text.size();) {
    char32_t cp;
    pos += NextChar(text, pos, &cp);
    if (cp >= kMappedLimit || t.char_to_byte[cp] < 0) return false;
    bytes.push_back(static_cast<char>(t.char_to_byte[cp]));
  }
  out->append(bytes);
  return true;
}

}  // namespace seqboat
