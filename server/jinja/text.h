// Text as Python's str sees it, for the template renderer: code points over
// UTF-8 bytes (lengths, indices and slices count code points), Python's
// whitespace, case mappings and repr, and `Str`, a string that remembers
// which of its bytes came from outside the template (a message's content),
// so that special-token text there can be told from the template's own.
//
// Bytes that are not UTF-8 count as one code point each and pass through
// unchanged; case mappings replace them with U+FFFD.
#ifndef SEQBOAT_SERVER_JINJA_TEXT_H_
#define SEQBOAT_SERVER_JINJA_TEXT_H_

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace seqboat::jinja {

// A byte range [begin, end).
struct Span {
  size_t begin = 0;
  size_t end = 0;
  bool operator==(const Span& o) const {
    return begin == o.begin && end == o.end;
  }
};

// A string and the byte ranges of it that came from outside the template:
// sorted, disjoint, non-empty and not touching one another.
struct Str {
  std::string text;
  std::vector<Span> untrusted;

  bool any_untrusted() const { return !untrusted.empty(); }
};

Str Trusted(std::string text);
Str Untrusted(std::string text);  // the whole text, when not empty
// `text` untrusted as a whole when `untrusted`.
Str WithTaint(std::string text, bool untrusted);
// Appends `src` to `dst`, shifting its ranges.
void Append(Str* dst, const Str& src);
void AppendTrusted(Str* dst, std::string_view text);
// Bytes [begin, end) of `s` with their ranges.
Str Substr(const Str& s, size_t begin, size_t end);

// One code point of `s` at byte `pos`: its value and byte length. A byte
// that does not start a valid sequence is itself (0x80..0xFF), length 1.
uint32_t DecodeAt(std::string_view s, size_t pos, size_t* length);
void AppendUtf8(uint32_t code_point, std::string* out);
// The byte offset of every code point of `s`, then s.size().
std::vector<size_t> CodePointOffsets(std::string_view s);
size_t CodePointCount(std::string_view s);
std::vector<uint32_t> CodePoints(std::string_view s);

// Python's str.isspace() of one code point.
bool IsSpace(uint32_t c);
// Python's str.isprintable() of one code point.
bool IsPrintable(uint32_t c);
bool IsCased(uint32_t c);
bool IsLowerCase(uint32_t c);
bool IsUpperCase(uint32_t c);

// Python's str.upper(), str.lower() (full mappings: "ß" is "SS"), and the
// title case of one code point (str.capitalize's first letter).
std::string Upper(std::string_view s);
std::string Lower(std::string_view s);
std::string TitleOf(uint32_t c);

// Python's repr() of a str: quoted with ' unless it holds ' and no ".
std::string Repr(std::string_view s);
// Python's repr() of a float ("1.0", "1e+16", "0.30000000000000004").
std::string FloatRepr(double v);

}  // namespace seqboat::jinja

#endif  // SEQBOAT_SERVER_JINJA_TEXT_H_
