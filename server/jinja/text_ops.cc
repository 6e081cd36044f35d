#include "server/jinja/text_ops.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <limits>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "server/jinja/text.h"

namespace seqboat::jinja {
namespace {

// Python's str.splitlines() boundaries.
bool IsLineBreak(uint32_t c) {
  return c == '\n' || c == '\r' || c == 0x0B || c == 0x0C || c == 0x1C ||
         c == 0x1D || c == 0x1E || c == 0x85 || c == 0x2028 || c == 0x2029;
}

std::string_view StripAscii(std::string_view s) {
  while (!s.empty() && absl::ascii_isspace(s.front())) s.remove_prefix(1);
  while (!s.empty() && absl::ascii_isspace(s.back())) s.remove_suffix(1);
  return s;
}

}  // namespace

std::string Escape(std::string_view s) {
  std::string out;
  for (char c : s) {
    switch (c) {
      case '&':
        out += "&amp;";
        break;
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '"':
        out += "&#34;";
        break;
      case '\'':
        out += "&#39;";
        break;
      default:
        out.push_back(c);
    }
  }
  return out;
}

std::pair<size_t, size_t> StripRange(std::string_view s, const Value& chars,
                                     bool left, bool right) {
  const std::vector<size_t> offsets = CodePointOffsets(s);
  std::vector<uint32_t> set;
  if (chars.is_string()) set = CodePoints(chars.text());
  const auto strip = [&](size_t i) {
    size_t n = 1;
    const uint32_t c = DecodeAt(s, offsets[i], &n);
    if (!chars.is_string()) return IsSpace(c);
    return std::find(set.begin(), set.end(), c) != set.end();
  };
  size_t b = 0;
  size_t e = offsets.size() - 1;
  if (left) {
    while (b < e && strip(b)) ++b;
  }
  if (right) {
    while (e > b && strip(e - 1)) --e;
  }
  return {offsets[b], offsets[e]};
}

std::string Replace(std::string_view s, std::string_view old,
                    std::string_view replacement, int64_t count) {
  std::string out;
  if (count < 0) count = std::numeric_limits<int64_t>::max();
  if (old.empty()) {
    const std::vector<size_t> offsets = CodePointOffsets(s);
    for (size_t i = 0; i + 1 < offsets.size(); ++i) {
      if (count > 0) {
        out += replacement;
        --count;
      }
      out.append(s.substr(offsets[i], offsets[i + 1] - offsets[i]));
    }
    if (count > 0) out += replacement;
    return out;
  }
  size_t pos = 0;
  while (count > 0) {
    const size_t found = s.find(old, pos);
    if (found == std::string_view::npos) break;
    out.append(s.substr(pos, found - pos));
    out += replacement;
    pos = found + old.size();
    --count;
  }
  out.append(s.substr(pos));
  return out;
}

size_t ReplacedSize(std::string_view s, std::string_view old,
                    std::string_view replacement, int64_t count) {
  if (count < 0) count = std::numeric_limits<int64_t>::max();
  uint64_t n = 0;
  if (old.empty()) {
    n = std::min<uint64_t>(CodePointCount(s) + 1, count);
  } else {
    size_t pos = 0;
    while (n < static_cast<uint64_t>(count)) {
      const size_t found = s.find(old, pos);
      if (found == std::string_view::npos) break;
      ++n;
      pos = found + old.size();
    }
  }
  return s.size() + n * replacement.size() - (old.empty() ? 0 : n * old.size());
}

std::string Capitalize(std::string_view s) {
  if (s.empty()) return "";
  size_t n = 1;
  const uint32_t first = DecodeAt(s, 0, &n);
  return TitleOf(first) + Lower(s.substr(n));
}

std::string PyTitle(std::string_view s) {
  std::string out;
  bool previous_cased = false;
  size_t pos = 0;
  while (pos < s.size()) {
    size_t n = 1;
    const uint32_t c = DecodeAt(s, pos, &n);
    out += previous_cased ? Lower(s.substr(pos, n)) : TitleOf(c);
    previous_cased = IsCased(c);
    pos += n;
  }
  return out;
}

std::string JinjaTitle(std::string_view s) {
  std::string out;
  bool word_start = true;
  size_t pos = 0;
  while (pos < s.size()) {
    size_t n = 1;
    const uint32_t c = DecodeAt(s, pos, &n);
    const bool separator =
        c == '-' || c == '(' || c == '{' || c == '[' || c == '<' || IsSpace(c);
    if (separator) {
      out.append(s.substr(pos, n));
      word_start = true;
    } else if (word_start) {
      out += Upper(s.substr(pos, n));
      word_start = false;
    } else {
      out += Lower(s.substr(pos, n));
    }
    pos += n;
  }
  return out;
}

std::vector<std::string> SplitLines(std::string_view s, bool keepends) {
  std::vector<std::string> lines;
  size_t start = 0;
  size_t pos = 0;
  while (pos < s.size()) {
    size_t n = 1;
    const uint32_t c = DecodeAt(s, pos, &n);
    if (IsLineBreak(c)) {
      size_t end = pos + n;
      if (c == '\r' && end < s.size() && s[end] == '\n') ++end;
      lines.emplace_back(s.substr(start, (keepends ? end : pos) - start));
      start = pos = end;
      continue;
    }
    pos += n;
  }
  if (start < s.size()) lines.emplace_back(s.substr(start));
  return lines;
}

bool ParseFloat(std::string_view text, double* out) {
  std::string s(StripAscii(text));
  s.erase(std::remove(s.begin(), s.end(), '_'), s.end());
  if (s.empty()) return false;
  std::string lower = absl::AsciiStrToLower(s);
  std::string_view body = lower;
  double sign = 1;
  if (!body.empty() && (body[0] == '+' || body[0] == '-')) {
    sign = body[0] == '-' ? -1 : 1;
    body.remove_prefix(1);
  }
  if (body == "inf" || body == "infinity") {
    *out = sign * std::numeric_limits<double>::infinity();
    return true;
  }
  if (body == "nan") {
    *out = std::numeric_limits<double>::quiet_NaN();
    return true;
  }
  for (char c : body) {
    if (!absl::ascii_isdigit(c) && c != '.' && c != 'e' && c != '+' &&
        c != '-') {
      return false;
    }
  }
  return absl::SimpleAtod(s, out);
}

bool ParseInt(std::string_view text, int64_t base, int64_t* out) {
  std::string_view s = StripAscii(text);
  bool negative = false;
  if (!s.empty() && (s[0] == '+' || s[0] == '-')) {
    negative = s[0] == '-';
    s.remove_prefix(1);
  }
  if (s.size() > 2 && s[0] == '0') {
    const char p = absl::ascii_tolower(s[1]);
    if ((p == 'x' && base == 16) || (p == 'o' && base == 8) ||
        (p == 'b' && base == 2)) {
      s.remove_prefix(2);
      if (!s.empty() && s[0] == '_') s.remove_prefix(1);
    }
  }
  if (s.empty() || s.front() == '_' || s.back() == '_') return false;
  uint64_t value = 0;
  char previous = 0;
  for (char c : s) {
    if (c == '_') {
      if (previous == '_') return false;
      previous = c;
      continue;
    }
    previous = c;
    int d = -1;
    if (absl::ascii_isdigit(c)) {
      d = c - '0';
    } else if (absl::ascii_isalpha(c)) {
      d = absl::ascii_tolower(c) - 'a' + 10;
    }
    if (d < 0 || d >= base) return false;
    if (value > (static_cast<uint64_t>(std::numeric_limits<int64_t>::max()) -
                 static_cast<uint64_t>(d)) /
                    static_cast<uint64_t>(base)) {
      return false;
    }
    value = value * static_cast<uint64_t>(base) + static_cast<uint64_t>(d);
  }
  *out = negative ? -static_cast<int64_t>(value) : static_cast<int64_t>(value);
  return true;
}

double RoundHalfEven(double x, int64_t digits) {
  if (!std::isfinite(x) || digits > 300) return x;
  if (digits < -308) return std::copysign(0.0, x);
  char buf[400];
  if (digits >= 0) {
    std::snprintf(buf, sizeof(buf), "%.*f", static_cast<int>(digits), x);
    return std::strtod(buf, nullptr);
  }
  const double scale = std::pow(10.0, static_cast<double>(-digits));
  const double y = x / scale;
  double r = std::nearbyint(y);  // the default rounding mode: ties to even
  return r * scale;
}

}  // namespace seqboat::jinja
