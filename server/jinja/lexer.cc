#include "server/jinja/lexer.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <limits>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "server/jinja/text.h"

namespace seqboat::jinja {
namespace {

// Jinja's operators, longest first.
constexpr std::string_view kOperators[] = {
    "**", "//", "==", "!=", ">=", "<=", "+", "-", "/", "*", "%", "~", "[",
    "]",  "(",  ")",  "{",  "}",  ">",  "<", "=", ".", ":", "|", ",", ";"};

bool IsDigit(char c) { return c >= '0' && c <= '9'; }
bool IsHex(char c) {
  return IsDigit(c) || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F');
}
bool IsNameStart(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_';
}
bool IsNameChar(char c) { return IsNameStart(c) || IsDigit(c); }

class Lexer {
 public:
  explicit Lexer(std::string source) : src_(std::move(source)) {}

  absl::StatusOr<std::vector<Token>> Run() {
    while (pos_ < src_.size()) {
      if (absl::Status s = Root(); !s.ok()) return s;
    }
    Token eof;
    eof.type = TokenType::kEof;
    eof.line = line_;
    tokens_.push_back(std::move(eof));
    return std::move(tokens_);
  }

 private:
  absl::Status Error(const std::string& message) const {
    return absl::InvalidArgumentError(
        absl::StrCat("line ", line_, ": ", message));
  }

  // Advances over [pos_, end), counting lines.
  void Consume(size_t end) {
    for (size_t i = pos_; i < end; ++i) line_ += src_[i] == '\n';
    pos_ = end;
  }

  size_t SkipSpaces(size_t pos) const {
    while (pos < src_.size()) {
      size_t n = 1;
      if (!IsSpace(DecodeAt(src_, pos, &n))) break;
      pos += n;
    }
    return pos;
  }

  // The length of `text` without its trailing whitespace (Python's rstrip).
  static size_t RStrip(std::string_view text) {
    const std::vector<size_t> offsets = CodePointOffsets(text);
    size_t end = offsets.size() - 1;
    while (end > 0) {
      size_t n = 1;
      if (!IsSpace(DecodeAt(text, offsets[end - 1], &n))) break;
      --end;
    }
    return offsets[end];
  }

  static bool AllSpaces(std::string_view text) {
    if (text.empty()) return false;
    size_t pos = 0;
    while (pos < text.size()) {
      size_t n = 1;
      if (!IsSpace(DecodeAt(text, pos, &n))) return false;
      pos += n;
    }
    return true;
  }

  // Text before a tag, with the tag's whitespace control applied: "-"
  // strips all whitespace before it; otherwise, for blocks and comments
  // (lstrip_blocks), the spaces between the line's start and the tag.
  void EmitText(std::string_view text, char sign, bool lstrip) {
    const int line = line_;
    std::string_view kept = text;
    if (sign == '-') {
      kept = text.substr(0, RStrip(text));
    } else if (sign != '+' && lstrip) {
      const size_t nl = text.rfind('\n');
      const size_t l_pos = nl == std::string_view::npos ? 0 : nl + 1;
      if ((l_pos > 0 || line_starting_) && AllSpaces(text.substr(l_pos))) {
        kept = text.substr(0, l_pos);
      }
    }
    if (!kept.empty()) {
      Token t;
      t.type = TokenType::kData;
      t.text = std::string(kept);
      t.line = line;
      tokens_.push_back(std::move(t));
    }
  }

  void Emit(TokenType type, std::string text, int line) {
    Token t;
    t.type = type;
    t.text = std::move(text);
    t.line = line;
    tokens_.push_back(std::move(t));
  }

  // Matches "{%[-+]?\s*raw\s*(-%}\s*|%})" at `pos`; returns its end or 0.
  size_t MatchRawBegin(size_t pos) const {
    size_t p = pos + 2;
    if (p < src_.size() && (src_[p] == '-' || src_[p] == '+')) ++p;
    p = SkipSpaces(p);
    if (src_.compare(p, 3, "raw") != 0) return 0;
    p = SkipSpaces(p + 3);
    if (src_.compare(p, 3, "-%}") == 0) return SkipSpaces(p + 3);
    if (src_.compare(p, 2, "%}") == 0) return p + 2;
    return 0;
  }

  absl::Status Root() {
    size_t start = std::string::npos;
    for (size_t i = pos_; i + 1 < src_.size(); ++i) {
      if (src_[i] == '{' &&
          (src_[i + 1] == '{' || src_[i + 1] == '%' || src_[i + 1] == '#')) {
        start = i;
        break;
      }
    }
    if (start == std::string::npos) {
      EmitText(std::string_view(src_).substr(pos_), 0, false);
      Consume(src_.size());
      return absl::OkStatus();
    }
    const char kind = src_[start + 1];
    const char sign = start + 2 < src_.size() ? src_[start + 2] : 0;
    const char control = sign == '-' || sign == '+' ? sign : 0;
    const std::string_view text =
        std::string_view(src_).substr(pos_, start - pos_);
    if (kind == '%') {
      if (const size_t raw_end = MatchRawBegin(start)) {
        EmitText(text, control, true);
        Consume(raw_end);
        line_starting_ = src_[raw_end - 1] == '\n';
        return Raw();
      }
    }
    EmitText(text, control, kind != '{');
    Consume(start + 2 + (control ? 1 : 0));
    line_starting_ = false;
    if (kind == '#') return Comment();
    Emit(kind == '{' ? TokenType::kVariableBegin : TokenType::kBlockBegin, "",
         line_);
    return Tag(kind == '%');
  }

  absl::Status Comment() {
    for (size_t i = pos_; i + 1 < src_.size(); ++i) {
      if (src_.compare(i, 3, "+#}") == 0) {
        Consume(i + 3);
        line_starting_ = false;
        return absl::OkStatus();
      }
      if (src_.compare(i, 3, "-#}") == 0) {
        const size_t end = SkipSpaces(i + 3);
        Consume(end);
        line_starting_ = src_[end - 1] == '\n';
        return absl::OkStatus();
      }
      if (src_.compare(i, 2, "#}") == 0) {
        size_t end = i + 2;
        if (end < src_.size() && src_[end] == '\n') ++end;  // trim_blocks
        Consume(end);
        line_starting_ = src_[end - 1] == '\n';
        return absl::OkStatus();
      }
    }
    return Error("Missing end of comment tag");
  }

  absl::Status Raw() {
    // "(.*?)({%[-+]?\s*endraw\s*(+%}|-%}\s*|%}\n?))"
    for (size_t i = pos_; i + 1 < src_.size(); ++i) {
      if (src_[i] != '{' || src_[i + 1] != '%') continue;
      size_t p = i + 2;
      char sign = 0;
      if (p < src_.size() && (src_[p] == '-' || src_[p] == '+')) {
        sign = src_[p++];
      }
      p = SkipSpaces(p);
      if (src_.compare(p, 6, "endraw") != 0) continue;
      p = SkipSpaces(p + 6);
      size_t end = 0;
      if (src_.compare(p, 3, "+%}") == 0) {
        end = p + 3;
      } else if (src_.compare(p, 3, "-%}") == 0) {
        end = SkipSpaces(p + 3);
      } else if (src_.compare(p, 2, "%}") == 0) {
        end = p + 2;
        if (end < src_.size() && src_[end] == '\n') ++end;
      } else {
        continue;
      }
      EmitText(std::string_view(src_).substr(pos_, i - pos_), sign, true);
      Consume(end);
      line_starting_ = src_[end - 1] == '\n';
      return absl::OkStatus();
    }
    return Error("Missing end of raw directive");
  }

  // The inside of {{ }} or {% %}, up to and including its end.
  absl::Status Tag(bool block) {
    std::string balance;  // the closing brackets owed
    while (true) {
      if (pos_ >= src_.size()) {
        return Error(block ? "unexpected end of template, expected '%}'"
                           : "unexpected end of template, expected '}}'");
      }
      if (balance.empty()) {
        size_t end = 0;
        if (block) {
          if (src_.compare(pos_, 3, "+%}") == 0) {
            end = pos_ + 3;
          } else if (src_.compare(pos_, 3, "-%}") == 0) {
            end = SkipSpaces(pos_ + 3);
          } else if (src_.compare(pos_, 2, "%}") == 0) {
            end = pos_ + 2;
            if (end < src_.size() && src_[end] == '\n') ++end;  // trim_blocks
          }
        } else {
          if (src_.compare(pos_, 3, "-}}") == 0) {
            end = SkipSpaces(pos_ + 3);
          } else if (src_.compare(pos_, 2, "}}") == 0) {
            end = pos_ + 2;
          }
        }
        if (end != 0) {
          Emit(block ? TokenType::kBlockEnd : TokenType::kVariableEnd, "",
               line_);
          Consume(end);
          line_starting_ = src_[end - 1] == '\n';
          return absl::OkStatus();
        }
      }
      const size_t spaces = SkipSpaces(pos_);
      if (spaces != pos_) {
        Consume(spaces);
        continue;
      }
      if (absl::Status s = ExpressionToken(&balance); !s.ok()) return s;
    }
  }

  // digits ("_" digits)*: the end, or `pos` when no digit is there.
  size_t ScanDigits(size_t pos) const {
    if (pos >= src_.size() || !IsDigit(src_[pos])) return pos;
    size_t p = pos;
    while (true) {
      while (p < src_.size() && IsDigit(src_[p])) ++p;
      if (p + 1 < src_.size() && src_[p] == '_' && IsDigit(src_[p + 1])) {
        ++p;
        continue;
      }
      return p;
    }
  }

  // Jinja's float_re at pos_: its end, or 0.
  size_t MatchFloat() const {
    if (pos_ > 0 && src_[pos_ - 1] == '.') return 0;
    const size_t int_end = ScanDigits(pos_);
    if (int_end == pos_) return 0;
    auto exponent = [&](size_t p) -> size_t {
      if (p >= src_.size() || (src_[p] != 'e' && src_[p] != 'E')) return 0;
      ++p;
      if (p < src_.size() && (src_[p] == '+' || src_[p] == '-')) ++p;
      const size_t e = ScanDigits(p);
      return e == p ? 0 : e;
    };
    size_t fraction_end = 0;
    if (int_end < src_.size() && src_[int_end] == '.') {
      const size_t f = ScanDigits(int_end + 1);
      if (f != int_end + 1) fraction_end = f;
    }
    if (fraction_end != 0) {
      if (const size_t e = exponent(fraction_end)) return e;
    }
    if (const size_t e = exponent(int_end)) return e;
    return fraction_end;
  }

  // Jinja's integer_re at pos_: its end, or 0.
  size_t MatchInteger() const {
    const size_t n = src_.size();
    if (pos_ >= n || !IsDigit(src_[pos_])) return 0;
    if (src_[pos_] == '0' && pos_ + 1 < n) {
      const char base = static_cast<char>(src_[pos_ + 1] | 0x20);
      auto digit_ok = [base](char c) {
        if (base == 'b') return c == '0' || c == '1';
        if (base == 'o') return c >= '0' && c <= '7';
        return IsHex(c);
      };
      if (base == 'b' || base == 'o' || base == 'x') {
        size_t p = pos_ + 2;
        size_t last = 0;
        while (true) {
          size_t q = p;
          if (q < n && src_[q] == '_') ++q;
          if (q < n && digit_ok(src_[q])) {
            p = q + 1;
            last = p;
          } else {
            break;
          }
        }
        if (last != 0) return last;
      }
    }
    // [1-9](_?\d)* | 0(_?0)*
    const bool zero = src_[pos_] == '0';
    size_t p = pos_ + 1;
    while (true) {
      size_t q = p;
      if (q < n && src_[q] == '_') ++q;
      if (q < n && (zero ? src_[q] == '0' : IsDigit(src_[q]))) {
        p = q + 1;
      } else {
        break;
      }
    }
    return p;
  }

  absl::Status ExpressionToken(std::string* balance) {
    const int line = line_;
    const char c = src_[pos_];
    if (const size_t end = MatchFloat()) {
      std::string digits = src_.substr(pos_, end - pos_);
      digits.erase(std::remove(digits.begin(), digits.end(), '_'),
                   digits.end());
      Token t;
      t.type = TokenType::kFloat;
      t.number = std::strtod(digits.c_str(), nullptr);
      t.text = src_.substr(pos_, end - pos_);
      t.line = line;
      tokens_.push_back(std::move(t));
      Consume(end);
      return absl::OkStatus();
    }
    if (const size_t end = MatchInteger()) {
      std::string digits = src_.substr(pos_, end - pos_);
      digits.erase(std::remove(digits.begin(), digits.end(), '_'),
                   digits.end());
      int base = 10;
      size_t skip = 0;
      if (digits.size() > 2 && digits[0] == '0') {
        const char b = static_cast<char>(digits[1] | 0x20);
        base = b == 'b' ? 2 : b == 'o' ? 8 : b == 'x' ? 16 : 10;
        if (base != 10) skip = 2;
      }
      uint64_t value = 0;
      for (size_t i = skip; i < digits.size(); ++i) {
        const char d = digits[i];
        const int v = IsDigit(d) ? d - '0' : (d | 0x20) - 'a' + 10;
        if (value > (std::numeric_limits<uint64_t>::max() - v) / base) {
          return Error("integer literal is too large");
        }
        value = value * base + v;
      }
      if (value > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
        return Error("integer literal is too large");
      }
      Token t;
      t.type = TokenType::kInteger;
      t.integer = static_cast<int64_t>(value);
      t.text = src_.substr(pos_, end - pos_);
      t.line = line;
      tokens_.push_back(std::move(t));
      Consume(end);
      return absl::OkStatus();
    }
    if (IsNameStart(c)) {
      size_t end = pos_ + 1;
      while (end < src_.size() && IsNameChar(src_[end])) ++end;
      Emit(TokenType::kName, src_.substr(pos_, end - pos_), line);
      Consume(end);
      return absl::OkStatus();
    }
    if (c == '\'' || c == '"') return StringLiteral();
    for (std::string_view op : kOperators) {
      if (src_.compare(pos_, op.size(), op) != 0) continue;
      if (op == "(" || op == "[" || op == "{") {
        balance->push_back(op == "(" ? ')' : op == "[" ? ']' : '}');
      } else if (op == ")" || op == "]" || op == "}") {
        if (balance->empty())
          return Error(absl::StrCat("unexpected '", std::string(op), "'"));
        if (balance->back() != op[0]) {
          return Error(absl::StrCat("unexpected '", std::string(op),
                                    "', expected '",
                                    std::string(1, balance->back()), "'"));
        }
        balance->pop_back();
      }
      Emit(TokenType::kOperator, std::string(op), line);
      Consume(pos_ + op.size());
      return absl::OkStatus();
    }
    size_t n = 1;
    DecodeAt(src_, pos_, &n);
    return Error(absl::StrCat("unexpected char ", Repr(src_.substr(pos_, n)),
                              " at ", pos_));
  }

  static int HexValue(char c) {
    return IsDigit(c) ? c - '0' : (c | 0x20) - 'a' + 10;
  }

  // A quoted literal, decoded as Python's unicode-escape codec decodes it
  // after Jinja escaped its non-ASCII characters with backslashreplace.
  absl::Status StringLiteral() {
    const int line = line_;
    const char quote = src_[pos_];
    size_t end = pos_ + 1;
    while (end < src_.size() && src_[end] != quote) {
      end += src_[end] == '\\' ? 2 : 1;
    }
    if (end >= src_.size()) {
      return Error(absl::StrCat("unexpected char ", Repr(std::string(1, quote)),
                                " at ", pos_, " (the string is not closed)"));
    }
    const std::string_view raw =
        std::string_view(src_).substr(pos_ + 1, end - pos_ - 1);
    std::string out;
    size_t i = 0;
    while (i < raw.size()) {
      if (raw[i] != '\\') {
        out.push_back(raw[i++]);
        continue;
      }
      const char e = raw[i + 1];  // the scan above pairs every backslash
      i += 2;
      if (static_cast<unsigned char>(e) >= 0x80) {
        // "\é" was "\\xe9" for the codec: a backslash, then "xe9".
        size_t n = 1;
        const uint32_t cp = DecodeAt(raw, i - 1, &n);
        char buf[16];
        if (cp < 0x100) {
          std::snprintf(buf, sizeof(buf), "\\x%02x", cp);
        } else if (cp < 0x10000) {
          std::snprintf(buf, sizeof(buf), "\\u%04x", cp);
        } else {
          std::snprintf(buf, sizeof(buf), "\\U%08x", cp);
        }
        out += buf;
        i += n - 1;
        continue;
      }
      switch (e) {
        case '\n':
          break;  // a line continuation
        case '\\':
        case '\'':
        case '"':
          out.push_back(e);
          break;
        case 'a':
          out.push_back('\a');
          break;
        case 'b':
          out.push_back('\b');
          break;
        case 'f':
          out.push_back('\f');
          break;
        case 'n':
          out.push_back('\n');
          break;
        case 'r':
          out.push_back('\r');
          break;
        case 't':
          out.push_back('\t');
          break;
        case 'v':
          out.push_back('\v');
          break;
        case 'x':
        case 'u':
        case 'U': {
          const size_t digits = e == 'x' ? 2 : e == 'u' ? 4 : 8;
          uint32_t cp = 0;
          for (size_t k = 0; k < digits; ++k) {
            if (i + k >= raw.size() || !IsHex(raw[i + k])) {
              return Error(absl::StrCat("truncated \\", std::string(1, e),
                                        std::string(digits, 'X'),
                                        " escape in a string literal"));
            }
            cp = cp * 16 + static_cast<uint32_t>(HexValue(raw[i + k]));
          }
          i += digits;
          if (cp > 0x10FFFF) {
            return Error("illegal Unicode character in a string literal");
          }
          if (cp >= 0xD800 && cp <= 0xDFFF) {
            return Error("a string literal holds a surrogate code point");
          }
          AppendUtf8(cp, &out);
          break;
        }
        case 'N':
          return Error("\\N{...} escapes are not supported");
        default:
          if (e >= '0' && e <= '7') {
            uint32_t cp = static_cast<uint32_t>(e - '0');
            for (int k = 0;
                 k < 2 && i < raw.size() && raw[i] >= '0' && raw[i] <= '7';
                 ++k) {
              cp = cp * 8 + static_cast<uint32_t>(raw[i++] - '0');
            }
            AppendUtf8(cp, &out);
          } else {
            out.push_back('\\');
            out.push_back(e);
          }
      }
    }
    Emit(TokenType::kString, std::move(out), line);
    Consume(end + 1);
    return absl::OkStatus();
  }

  std::string src_;
  size_t pos_ = 0;
  int line_ = 1;
  bool line_starting_ = true;
  std::vector<Token> tokens_;
};

}  // namespace

std::string Describe(const Token& token) {
  switch (token.type) {
    case TokenType::kData:
      return "template data";
    case TokenType::kVariableBegin:
      return "begin of print statement";
    case TokenType::kVariableEnd:
      return "end of print statement";
    case TokenType::kBlockBegin:
      return "begin of statement block";
    case TokenType::kBlockEnd:
      return "end of statement block";
    case TokenType::kString:
      return "string";
    case TokenType::kEof:
      return "end of template";
    default:
      return absl::StrCat("'", token.text, "'");
  }
}

absl::StatusOr<std::vector<Token>> Tokenize(std::string_view source) {
  // Jinja's newline handling: every line break is "\n", and one trailing
  // one goes (keep_trailing_newline is off).
  std::string text;
  text.reserve(source.size());
  for (size_t i = 0; i < source.size(); ++i) {
    if (source[i] == '\r') {
      text.push_back('\n');
      if (i + 1 < source.size() && source[i + 1] == '\n') ++i;
    } else {
      text.push_back(source[i]);
    }
  }
  if (!text.empty() && text.back() == '\n') text.pop_back();
  return Lexer(std::move(text)).Run();
}

}  // namespace seqboat::jinja
