#include "server/jinja/text.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <utility>

#include "unicode/ucasemap.h"
#include "unicode/uchar.h"
#include "unicode/utypes.h"

namespace seqboat::jinja {

Str Trusted(std::string text) { return Str{std::move(text), {}}; }

Str Untrusted(std::string text) {
  Str s{std::move(text), {}};
  if (!s.text.empty()) s.untrusted.push_back({0, s.text.size()});
  return s;
}

Str WithTaint(std::string text, bool untrusted) {
  return untrusted ? Untrusted(std::move(text)) : Trusted(std::move(text));
}

void Append(Str* dst, const Str& src) {
  const size_t shift = dst->text.size();
  dst->text += src.text;
  for (const Span& span : src.untrusted) {
    Span moved{span.begin + shift, span.end + shift};
    if (!dst->untrusted.empty() && dst->untrusted.back().end == moved.begin) {
      dst->untrusted.back().end = moved.end;
    } else {
      dst->untrusted.push_back(moved);
    }
  }
}

void AppendTrusted(Str* dst, std::string_view text) {
  dst->text.append(text.data(), text.size());
}

Str Substr(const Str& s, size_t begin, size_t end) {
  Str out;
  if (end > s.text.size()) end = s.text.size();
  if (begin >= end) return out;
  out.text = s.text.substr(begin, end - begin);
  for (const Span& span : s.untrusted) {
    const size_t b = std::max(span.begin, begin);
    const size_t e = std::min(span.end, end);
    if (b < e) out.untrusted.push_back({b - begin, e - begin});
  }
  return out;
}

uint32_t DecodeAt(std::string_view s, size_t pos, size_t* length) {
  const auto byte = [&](size_t i) { return static_cast<uint8_t>(s[i]); };
  const uint8_t b0 = byte(pos);
  *length = 1;
  if (b0 < 0x80) return b0;
  int n = 0;
  uint32_t cp = 0;
  uint32_t min = 0;
  if (b0 >= 0xC2 && b0 <= 0xDF) {
    n = 1;
    cp = b0 & 0x1F;
    min = 0x80;
  } else if (b0 >= 0xE0 && b0 <= 0xEF) {
    n = 2;
    cp = b0 & 0x0F;
    min = 0x800;
  } else if (b0 >= 0xF0 && b0 <= 0xF4) {
    n = 3;
    cp = b0 & 0x07;
    min = 0x10000;
  } else {
    return b0;
  }
  if (pos + n >= s.size()) return b0;  // truncated
  for (int i = 1; i <= n; ++i) {
    const uint8_t b = byte(pos + i);
    if ((b & 0xC0) != 0x80) return b0;
    cp = (cp << 6) | (b & 0x3F);
  }
  if (cp < min || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return b0;
  *length = static_cast<size_t>(n) + 1;
  return cp;
}

void AppendUtf8(uint32_t c, std::string* out) {
  if (c < 0x80) {
    out->push_back(static_cast<char>(c));
  } else if (c < 0x800) {
    out->push_back(static_cast<char>(0xC0 | (c >> 6)));
    out->push_back(static_cast<char>(0x80 | (c & 0x3F)));
  } else if (c < 0x10000) {
    out->push_back(static_cast<char>(0xE0 | (c >> 12)));
    out->push_back(static_cast<char>(0x80 | ((c >> 6) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | (c & 0x3F)));
  } else {
    out->push_back(static_cast<char>(0xF0 | (c >> 18)));
    out->push_back(static_cast<char>(0x80 | ((c >> 12) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | ((c >> 6) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | (c & 0x3F)));
  }
}

std::vector<size_t> CodePointOffsets(std::string_view s) {
  std::vector<size_t> offsets;
  offsets.reserve(s.size() + 1);
  size_t pos = 0;
  while (pos < s.size()) {
    offsets.push_back(pos);
    size_t n = 1;
    DecodeAt(s, pos, &n);
    pos += n;
  }
  offsets.push_back(s.size());
  return offsets;
}

size_t CodePointCount(std::string_view s) {
  size_t count = 0;
  size_t pos = 0;
  while (pos < s.size()) {
    size_t n = 1;
    DecodeAt(s, pos, &n);
    pos += n;
    ++count;
  }
  return count;
}

std::vector<uint32_t> CodePoints(std::string_view s) {
  std::vector<uint32_t> out;
  size_t pos = 0;
  while (pos < s.size()) {
    size_t n = 1;
    out.push_back(DecodeAt(s, pos, &n));
    pos += n;
  }
  return out;
}

bool IsSpace(uint32_t c) {
  // Python: bidirectional class WS, B or S, or category Zs.
  return (c >= 0x09 && c <= 0x0D) || (c >= 0x1C && c <= 0x20) || c == 0x85 ||
         c == 0xA0 || c == 0x1680 || (c >= 0x2000 && c <= 0x200A) ||
         c == 0x2028 || c == 0x2029 || c == 0x202F || c == 0x205F ||
         c == 0x3000;
}

bool IsPrintable(uint32_t c) {
  if (c == ' ') return true;
  if (c > 0x10FFFF) return false;
  switch (u_charType(static_cast<UChar32>(c))) {
    case U_CONTROL_CHAR:
    case U_FORMAT_CHAR:
    case U_SURROGATE:
    case U_PRIVATE_USE_CHAR:
    case U_UNASSIGNED:
    case U_LINE_SEPARATOR:
    case U_PARAGRAPH_SEPARATOR:
    case U_SPACE_SEPARATOR:
      return false;
    default:
      return true;
  }
}

bool IsCased(uint32_t c) {
  return u_hasBinaryProperty(static_cast<UChar32>(c), UCHAR_CASED);
}
bool IsLowerCase(uint32_t c) {
  return u_hasBinaryProperty(static_cast<UChar32>(c), UCHAR_LOWERCASE);
}
bool IsUpperCase(uint32_t c) {
  return u_hasBinaryProperty(static_cast<UChar32>(c), UCHAR_UPPERCASE);
}

namespace {

enum class Mapping { kUpper, kLower, kTitle };

std::string MapCase(std::string_view s, Mapping mapping) {
  if (s.empty()) return "";
  UErrorCode error = U_ZERO_ERROR;
  UCaseMap* map = ucasemap_open(
      "", mapping == Mapping::kTitle ? U_TITLECASE_WHOLE_STRING : 0, &error);
  if (U_FAILURE(error)) return std::string(s);
  std::string out(s.size() * 3 + 16, '\0');
  for (int attempt = 0; attempt < 2; ++attempt) {
    error = U_ZERO_ERROR;
    int32_t n = 0;
    const auto length = static_cast<int32_t>(s.size());
    const auto capacity = static_cast<int32_t>(out.size());
    switch (mapping) {
      case Mapping::kUpper:
        n = ucasemap_utf8ToUpper(map, out.data(), capacity, s.data(), length,
                                 &error);
        break;
      case Mapping::kLower:
        n = ucasemap_utf8ToLower(map, out.data(), capacity, s.data(), length,
                                 &error);
        break;
      case Mapping::kTitle:
        n = ucasemap_utf8ToTitle(map, out.data(), capacity, s.data(), length,
                                 &error);
        break;
    }
    if (error == U_BUFFER_OVERFLOW_ERROR) {
      out.resize(static_cast<size_t>(n) + 1);
      continue;
    }
    ucasemap_close(map);
    if (U_FAILURE(error)) return std::string(s);
    out.resize(static_cast<size_t>(n));
    return out;
  }
  ucasemap_close(map);
  return std::string(s);
}

}  // namespace

std::string Upper(std::string_view s) { return MapCase(s, Mapping::kUpper); }
std::string Lower(std::string_view s) { return MapCase(s, Mapping::kLower); }
std::string TitleOf(uint32_t c) {
  std::string one;
  AppendUtf8(c, &one);
  return MapCase(one, Mapping::kTitle);
}

std::string Repr(std::string_view s) {
  const bool has_single = s.find('\'') != std::string_view::npos;
  const bool has_double = s.find('"') != std::string_view::npos;
  const char quote = has_single && !has_double ? '"' : '\'';
  std::string out(1, quote);
  size_t pos = 0;
  while (pos < s.size()) {
    size_t n = 1;
    const uint32_t c = DecodeAt(s, pos, &n);
    const bool invalid = n == 1 && c >= 0x80;
    if (c == static_cast<uint32_t>(quote) || c == '\\') {
      out.push_back('\\');
      out.push_back(static_cast<char>(c));
    } else if (c == '\n') {
      out += "\\n";
    } else if (c == '\r') {
      out += "\\r";
    } else if (c == '\t') {
      out += "\\t";
    } else if (!invalid && IsPrintable(c)) {
      out.append(s.substr(pos, n));
    } else {
      char buf[16];
      if (c < 0x100) {
        std::snprintf(buf, sizeof(buf), "\\x%02x", c);
      } else if (c < 0x10000) {
        std::snprintf(buf, sizeof(buf), "\\u%04x", c);
      } else {
        std::snprintf(buf, sizeof(buf), "\\U%08x", c);
      }
      out += buf;
    }
    pos += n;
  }
  out.push_back(quote);
  return out;
}

std::string FloatRepr(double v) {
  if (std::isnan(v)) return "nan";
  if (std::isinf(v)) return v > 0 ? "inf" : "-inf";
  // The shortest digits that read back as v, as Python's repr finds them.
  char buf[64];
  int precision = 1;
  for (; precision <= 17; ++precision) {
    std::snprintf(buf, sizeof(buf), "%.*e", precision - 1, v);
    if (std::strtod(buf, nullptr) == v) break;
  }
  // buf: [-]d[.ddd]e[+-]XX
  std::string text(buf);
  const bool negative = text[0] == '-';
  if (negative) text.erase(0, 1);
  const size_t e = text.find('e');
  std::string digits;
  for (size_t i = 0; i < e; ++i) {
    if (text[i] != '.') digits.push_back(text[i]);
  }
  int exponent = std::atoi(text.c_str() + e + 1);
  while (digits.size() > 1 && digits.back() == '0') digits.pop_back();
  std::string out = negative ? "-" : "";
  if (exponent < -4 || exponent >= 16) {
    out += digits[0];
    if (digits.size() > 1) {
      out += '.';
      out += digits.substr(1);
    }
    char exp[16];
    std::snprintf(exp, sizeof(exp), "e%c%02d", exponent < 0 ? '-' : '+',
                  std::abs(exponent));
    out += exp;
    return out;
  }
  const int point = exponent + 1;  // digits before the decimal point
  if (point <= 0) {
    out += "0.";
    out.append(static_cast<size_t>(-point), '0');
    out += digits;
  } else if (static_cast<size_t>(point) >= digits.size()) {
    out += digits;
    out.append(static_cast<size_t>(point) - digits.size(), '0');
    out += ".0";
  } else {
    out += digits.substr(0, static_cast<size_t>(point));
    out += '.';
    out += digits.substr(static_cast<size_t>(point));
  }
  return out;
}

}  // namespace seqboat::jinja
