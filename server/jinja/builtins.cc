// Jinja's builtin filters and tests, the str/dict/list methods the sandbox
// allows, the globals transformers and Jinja define, and Python's %
// formatting, each as Jinja 3.1 and Python 3 define them.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <ctime>
#include <initializer_list>
#include <limits>
#include <string_view>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "server/jinja/renderer.h"
#include "unicode/uchar.h"

namespace seqboat::jinja {
namespace {

constexpr std::string_view kFilters[] = {
    "abs",         "attr",     "capitalize", "center",   "count",   "d",
    "default",     "dictsort", "e",          "escape",   "first",   "float",
    "forceescape", "format",   "indent",     "int",      "items",   "join",
    "last",        "length",   "list",       "lower",    "map",     "max",
    "min",         "reject",   "rejectattr", "replace",  "reverse", "round",
    "safe",        "select",   "selectattr", "sort",     "string",  "sum",
    "title",       "tojson",   "trim",       "truncate", "unique",  "upper",
    "wordcount"};
// Jinja filters this renderer leaves out.
constexpr std::string_view kUnsupportedFilters[] = {
    "batch",     "filesizeformat", "groupby", "pprint",   "random", "slice",
    "striptags", "urlencode",      "urlize",  "wordwrap", "xmlattr"};
constexpr std::string_view kTests[] = {
    "boolean",  "callable",    "defined", "divisibleby", "eq",       "equalto",
    "escaped",  "even",        "false",   "filter",      "float",    "ge",
    "gt",       "greaterthan", "in",      "integer",     "iterable", "le",
    "lessthan", "lower",       "lt",      "mapping",     "ne",       "none",
    "number",   "odd",         "sameas",  "sequence",    "string",   "test",
    "true",     "undefined",   "upper",   "==",          "!=",       "<",
    "<=",       ">",           ">="};
// Jinja's MAX_RANGE: the sandbox's bound on range().
constexpr int64_t kMaxRange = 100000;

template <size_t N>
bool In(const std::string_view (&names)[N], std::string_view name) {
  return std::find(std::begin(names), std::end(names), name) != std::end(names);
}

absl::Status Invalid(std::string message) {
  return absl::InvalidArgumentError(std::move(message));
}

absl::StatusOr<int64_t> IntArg(const Value& v, const char* what) {
  if (v.is_integral()) return v.int_value();
  return Invalid(absl::StrCat(what, " must be an integer, got ", v.TypeName()));
}

bool IsPresent(const Value& v) { return !v.is_undefined() && !v.is_none(); }

// The text of `v` as Jinja's soft_str gives it to string filters.
Str StrOf(const Value& v) { return ToStr(v); }

// A result computed from `from`: untrusted as a whole when any of it was.
Str Derived(std::string text, std::initializer_list<const Value*> from) {
  bool untrusted = false;
  for (const Value* v : from) untrusted = untrusted || AnyUntrusted(*v);
  return WithTaint(std::move(text), untrusted);
}

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

// Python's str.strip family: code points in `chars` (whitespace when
// absent) off either end; the kept bytes, as [begin, end).
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

// Python's str.replace.
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

// The size of Replace's result, computed before building it.
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

// Python's str.title().
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

// Jinja's do_title: words start after runs of "-", whitespace and "([{<".
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

// Python's str.splitlines() boundaries.
bool IsLineBreak(uint32_t c) {
  return c == '\n' || c == '\r' || c == 0x0B || c == 0x0C || c == 0x1C ||
         c == 0x1D || c == 0x1E || c == 0x85 || c == 0x2028 || c == 0x2029;
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

std::string_view StripAscii(std::string_view s) {
  while (!s.empty() && absl::ascii_isspace(s.front())) s.remove_prefix(1);
  while (!s.empty() && absl::ascii_isspace(s.back())) s.remove_suffix(1);
  return s;
}

// Python's float(str).
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

// Python's int(str, base) for bases 2..36.
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

// Python's round(x, ndigits) for floats: to the nearest, ties to even, of
// the exact decimal value.
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

}  // namespace

bool Renderer::HasFilter(const std::string& name) { return In(kFilters, name); }

bool Renderer::HasTest(const std::string& name) { return In(kTests, name); }

absl::StatusOr<Value> Renderer::Filter(const std::string& name, Value subject,
                                       Args args, Kwargs kwargs) {
  const auto bind = [&](std::vector<Param> params) {
    args.insert(args.begin(), subject);
    return BindArgs(name, std::move(args), std::move(kwargs), params);
  };
  if (name == "trim") {
    ASSIGN_OR_RETURN(auto a, bind({{"value"}, {"chars", Value::None()}}));
    const Str s = StrOf(a[0]);
    const auto [b, e] = StripRange(s.text, a[1], true, true);
    return MakeString(Substr(s, b, e));
  }
  if (name == "tojson") {
    ASSIGN_OR_RETURN(auto a, bind({{"x"},
                                   {"ensure_ascii", Value::Bool(false)},
                                   {"indent", Value::None()},
                                   {"separators", Value::None()},
                                   {"sort_keys", Value::Bool(false)}}));
    JsonOptions options;
    options.ensure_ascii = a[1].Truthy();
    if (a[2].is_integral()) {
      options.indent = std::string(
          static_cast<size_t>(std::clamp<int64_t>(a[2].int_value(), 0, 64)),
          ' ');
    } else if (a[2].is_string()) {
      options.indent = a[2].text();
    } else if (IsPresent(a[2])) {
      return Invalid("tojson's indent must be an integer or a string");
    }
    if (options.indent.has_value()) options.item_separator = ",";
    if (IsPresent(a[3])) {
      if (!a[3].is_sequence() || a[3].items().size() != 2 ||
          !a[3].items()[0].is_string() || !a[3].items()[1].is_string()) {
        return Invalid("tojson's separators must be two strings");
      }
      options.item_separator = a[3].items()[0].text();
      options.key_separator = a[3].items()[1].text();
    }
    options.sort_keys = a[4].Truthy();
    RETURN_IF_ERROR(Step(a[0].depth() + 1));
    ASSIGN_OR_RETURN(std::string json, ToJson(a[0], options));
    return MakeString(Derived(std::move(json), {&a[0]}));
  }
  if (name == "length" || name == "count") {
    ASSIGN_OR_RETURN(auto a, bind({{"obj"}}));
    const Value& v = a[0];
    switch (v.kind()) {
      case Value::Kind::kUndefined:
        return Value::Int(0);
      case Value::Kind::kString:
        return Value::Int(static_cast<int64_t>(CodePointCount(v.text())));
      case Value::Kind::kList:
      case Value::Kind::kTuple:
        return Value::Int(static_cast<int64_t>(v.items().size()));
      case Value::Kind::kDict:
        return Value::Int(static_cast<int64_t>(v.dict().items.size()));
      default:
        return Invalid(
            absl::StrCat("object of type '", v.TypeName(), "' has no len()"));
    }
  }
  if (name == "upper" || name == "lower" || name == "capitalize" ||
      name == "title" || name == "escape" || name == "e" ||
      name == "forceescape" || name == "wordcount") {
    ASSIGN_OR_RETURN(auto a, bind({{"s"}}));
    const Str s = StrOf(a[0]);
    std::string out;
    if (name == "upper") {
      out = Upper(s.text);
    } else if (name == "lower") {
      out = Lower(s.text);
    } else if (name == "capitalize") {
      out = Capitalize(s.text);
    } else if (name == "title") {
      out = JinjaTitle(s.text);
    } else if (name == "wordcount") {
      int64_t words = 0;
      bool in_word = false;
      for (uint32_t c : CodePoints(s.text)) {
        const bool word = c == '_' || u_isalnum(static_cast<UChar32>(c));
        if (word && !in_word) ++words;
        in_word = word;
      }
      return Value::Int(words);
    } else {
      out = Escape(s.text);
    }
    return MakeString(WithTaint(std::move(out), s.any_untrusted()));
  }
  if (name == "string") {
    ASSIGN_OR_RETURN(auto a, bind({{"value"}}));
    return MakeString(StrOf(a[0]));
  }
  if (name == "safe") {
    ASSIGN_OR_RETURN(auto a, bind({{"value"}}));
    return a[0];
  }
  if (name == "default" || name == "d") {
    ASSIGN_OR_RETURN(auto a, bind({{"value"},
                                   {"default_value", Value::String("")},
                                   {"boolean", Value::Bool(false)}}));
    if (a[0].is_undefined() || (a[2].Truthy() && !a[0].Truthy())) return a[1];
    return a[0];
  }
  if (name == "join") {
    ASSIGN_OR_RETURN(auto a, bind({{"value"},
                                   {"d", Value::String("")},
                                   {"attribute", Value::None()}}));
    ASSIGN_OR_RETURN(std::vector<Value> items, Iterate(a[0]));
    const Str separator = StrOf(a[1]);
    Str out;
    for (size_t i = 0; i < items.size(); ++i) {
      Value item = items[i];
      if (IsPresent(a[2])) {
        ASSIGN_OR_RETURN(item, GetPath(item, a[2]));
      }
      const Str part = StrOf(item);
      RETURN_IF_ERROR(
          Reserve(out.text.size() + part.text.size() + separator.text.size()));
      if (i > 0) Append(&out, separator);
      Append(&out, part);
    }
    return Value::String(std::move(out));
  }
  if (name == "list") {
    ASSIGN_OR_RETURN(auto a, bind({{"value"}}));
    ASSIGN_OR_RETURN(std::vector<Value> items, Iterate(a[0]));
    return MakeList(std::move(items));
  }
  if (name == "items") {
    ASSIGN_OR_RETURN(auto a, bind({{"value"}}));
    if (a[0].is_undefined()) return MakeList({});
    if (!a[0].is_dict()) {
      return Invalid("Can only get item pairs from a mapping.");
    }
    return CallMethod(a[0], "items", {}, {});
  }
  if (name == "first" || name == "last") {
    ASSIGN_OR_RETURN(auto a, bind({{"seq"}}));
    ASSIGN_OR_RETURN(std::vector<Value> items, Iterate(a[0]));
    if (items.empty()) {
      return Value::Undefined(
          absl::StrCat("No ", name, " item, sequence was empty."));
    }
    return name == "first" ? items.front() : items.back();
  }
  if (name == "reverse") {
    ASSIGN_OR_RETURN(auto a, bind({{"value"}}));
    if (a[0].is_string()) {
      const std::vector<size_t> offsets = CodePointOffsets(a[0].text());
      std::string out;
      for (size_t i = offsets.size() - 1; i > 0; --i) {
        out.append(a[0].text(), offsets[i - 1], offsets[i] - offsets[i - 1]);
      }
      return MakeString(WithTaint(std::move(out), AnyUntrusted(a[0])));
    }
    ASSIGN_OR_RETURN(std::vector<Value> items, Iterate(a[0]));
    std::reverse(items.begin(), items.end());
    return MakeList(std::move(items));
  }
  if (name == "replace") {
    ASSIGN_OR_RETURN(auto a,
                     bind({{"s"}, {"old"}, {"new"}, {"count", Value::None()}}));
    int64_t count = -1;
    if (IsPresent(a[3])) {
      ASSIGN_OR_RETURN(count, IntArg(a[3], "replace's count"));
    }
    const Str s = StrOf(a[0]);
    const Str old = StrOf(a[1]);
    const Str replacement = StrOf(a[2]);
    RETURN_IF_ERROR(
        Reserve(ReplacedSize(s.text, old.text, replacement.text, count)));
    return Value::String(Derived(
        Replace(s.text, old.text, replacement.text, count), {&a[0], &a[2]}));
  }
  if (name == "center") {
    ASSIGN_OR_RETURN(auto a, bind({{"value"}, {"width", Value::Int(80)}}));
    return StrMethod(Value::String(StrOf(a[0])), "center", {a[1]}, {});
  }
  if (name == "indent") {
    ASSIGN_OR_RETURN(auto a, bind({{"s"},
                                   {"width", Value::Int(4)},
                                   {"first", Value::Bool(false)},
                                   {"blank", Value::Bool(false)}}));
    std::string indention;
    if (a[1].is_string()) {
      indention = a[1].text();
    } else {
      ASSIGN_OR_RETURN(int64_t width, IntArg(a[1], "indent's width"));
      if (width > static_cast<int64_t>(limits_.max_output_bytes)) {
        return Reserve(static_cast<size_t>(width));
      }
      indention.assign(static_cast<size_t>(std::max<int64_t>(0, width)), ' ');
    }
    const std::string s = StrOf(a[0]).text + "\n";
    const std::vector<std::string> lines = SplitLines(s, false);
    RETURN_IF_ERROR(Reserve(s.size() + lines.size() * indention.size()));
    std::string out;
    if (a[3].Truthy()) {
      for (size_t i = 0; i < lines.size(); ++i) {
        if (i > 0) out += "\n" + indention;
        out += lines[i];
      }
    } else {
      out = lines.empty() ? "" : lines[0];
      for (size_t i = 1; i < lines.size(); ++i) {
        out += "\n";
        if (!lines[i].empty()) out += indention;
        out += lines[i];
      }
    }
    if (a[2].Truthy()) out = indention + out;
    return MakeString(Derived(std::move(out), {&a[0]}));
  }
  if (name == "int") {
    ASSIGN_OR_RETURN(auto a, bind({{"value"},
                                   {"default", Value::Int(0)},
                                   {"base", Value::Int(10)}}));
    const Value& v = a[0];
    if (v.is_integral()) return Value::Int(v.int_value());
    double d = 0;
    if (v.is_string()) {
      ASSIGN_OR_RETURN(int64_t base, IntArg(a[2], "int's base"));
      int64_t parsed = 0;
      if (base >= 2 && base <= 36 && ParseInt(v.text(), base, &parsed)) {
        return Value::Int(parsed);
      }
      if (!ParseFloat(v.text(), &d) || std::isnan(d)) return a[1];
    } else if (v.kind() == Value::Kind::kFloat) {
      d = v.number();
      if (std::isnan(d)) return Invalid("cannot convert float NaN to integer");
    } else {
      return a[1];
    }
    if (!(std::fabs(d) < 9.2e18)) {
      return Invalid("the float is too large to convert to an integer");
    }
    return Value::Int(static_cast<int64_t>(d));
  }
  if (name == "float") {
    ASSIGN_OR_RETURN(auto a, bind({{"value"}, {"default", Value::Float(0.0)}}));
    const Value& v = a[0];
    if (v.is_number()) return Value::Float(v.number());
    double d = 0;
    if (v.is_string() && ParseFloat(v.text(), &d)) return Value::Float(d);
    return a[1];
  }
  if (name == "abs") {
    ASSIGN_OR_RETURN(auto a, bind({{"x"}}));
    if (a[0].kind() == Value::Kind::kFloat) {
      return Value::Float(std::fabs(a[0].number()));
    }
    if (a[0].is_integral()) {
      if (a[0].int_value() == std::numeric_limits<int64_t>::min()) {
        return Invalid("integer overflow");
      }
      return Value::Int(std::abs(a[0].int_value()));
    }
    return Invalid(
        absl::StrCat("bad operand type for abs(): '", a[0].TypeName(), "'"));
  }
  if (name == "round") {
    ASSIGN_OR_RETURN(auto a, bind({{"value"},
                                   {"precision", Value::Int(0)},
                                   {"method", Value::String("common")}}));
    ASSIGN_OR_RETURN(int64_t precision, IntArg(a[1], "round's precision"));
    const std::string method = a[2].is_string() ? a[2].text() : "";
    if (method != "common" && method != "ceil" && method != "floor") {
      return Invalid("method must be common, ceil or floor");
    }
    if (!a[0].is_number()) {
      return Invalid(
          absl::StrCat("round() needs a number, got ", a[0].TypeName()));
    }
    if (method == "common") {
      if (a[0].is_integral()) return Value::Int(a[0].int_value());
      return Value::Float(RoundHalfEven(a[0].number(), precision));
    }
    const double scale = std::pow(
        10.0, static_cast<double>(std::clamp<int64_t>(precision, -400, 400)));
    const double x = a[0].number() * scale;
    return Value::Float((method == "ceil" ? std::ceil(x) : std::floor(x)) /
                        scale);
  }
  if (name == "format") {
    if (!args.empty() && !kwargs.empty()) {
      return Invalid(
          "format can't handle positional and keyword arguments "
          "at the same time");
    }
    Value arguments;
    if (!kwargs.empty()) {
      std::vector<std::pair<Value, Value>> items;
      for (auto& [k, v] : kwargs) items.emplace_back(Value::String(k), v);
      ASSIGN_OR_RETURN(arguments, Value::Dict(std::move(items)));
    } else {
      ASSIGN_OR_RETURN(arguments, Value::Tuple(std::move(args)));
    }
    return Format(Value::String(StrOf(subject)), arguments);
  }
  if (name == "attr") {
    ASSIGN_OR_RETURN(auto a, bind({{"obj"}, {"name"}}));
    if (!a[1].is_string()) return Invalid("attr's name must be a string");
    // getattr only: a dict's keys are not its attributes.
    if (a[0].is_dict()) {
      if (a[1].text() == "get" || a[1].text() == "items" ||
          a[1].text() == "keys" || a[1].text() == "values" ||
          a[1].text() == "copy") {
        return GetAttr(a[0], a[1].text());
      }
      return Value::Undefined(
          absl::StrCat("'dict object' has no attribute '", a[1].text(), "'"));
    }
    return GetAttr(a[0], a[1].text());
  }
  if (name == "map") {
    ASSIGN_OR_RETURN(std::vector<Value> items, Iterate(subject));
    std::vector<Value> out;
    bool by_attribute = false;
    Value attribute;
    Value fallback;
    for (const auto& [k, v] : kwargs) {
      if (k == "attribute") {
        by_attribute = true;
        attribute = v;
      } else if (k == "default") {
        fallback = v;
      }
    }
    if (by_attribute) {
      for (const auto& [k, v] : kwargs) {
        if (k != "attribute" && k != "default") {
          return Invalid(absl::StrCat("Unexpected keyword argument '", k, "'"));
        }
      }
      for (const Value& item : items) {
        ASSIGN_OR_RETURN(Value v, GetPath(item, attribute));
        if (v.is_undefined() && !fallback.is_undefined()) v = fallback;
        out.push_back(std::move(v));
      }
      return MakeList(std::move(out));
    }
    if (args.empty() || !args[0].is_string()) {
      return Invalid("map requires a filter argument");
    }
    const std::string filter = args[0].text();
    Args rest(args.begin() + 1, args.end());
    for (const Value& item : items) {
      ASSIGN_OR_RETURN(Value v, Filter(filter, item, rest, kwargs));
      out.push_back(std::move(v));
    }
    return MakeList(std::move(out));
  }
  if (name == "select" || name == "reject" || name == "selectattr" ||
      name == "rejectattr") {
    const bool attr = name == "selectattr" || name == "rejectattr";
    const bool keep_when = name == "select" || name == "selectattr";
    ASSIGN_OR_RETURN(std::vector<Value> items, Iterate(subject));
    Value attribute;
    size_t next = 0;
    if (attr) {
      if (args.empty())
        return Invalid(absl::StrCat(name, " needs an attribute"));
      attribute = args[0];
      next = 1;
    }
    std::string test;
    if (args.size() > next) {
      if (!args[next].is_string()) {
        return Invalid(absl::StrCat(name, "'s test must be a test name"));
      }
      test = args[next].text();
      ++next;
    }
    Args rest(args.begin() + static_cast<std::ptrdiff_t>(next), args.end());
    std::vector<Value> out;
    for (const Value& item : items) {
      Value probe = item;
      if (attr) {
        ASSIGN_OR_RETURN(probe, GetPath(item, attribute));
      }
      bool result = probe.Truthy();
      if (!test.empty()) {
        ASSIGN_OR_RETURN(result, Test(test, probe, rest, kwargs));
      }
      if (result == keep_when) out.push_back(item);
    }
    return MakeList(std::move(out));
  }
  if (name == "sort" || name == "unique" || name == "min" || name == "max") {
    std::vector<Param> params = {{"value"}};
    if (name == "sort") params.push_back({"reverse", Value::Bool(false)});
    params.push_back({"case_sensitive", Value::Bool(false)});
    params.push_back({"attribute", Value::None()});
    ASSIGN_OR_RETURN(auto a, bind(params));
    const bool reverse = name == "sort" && a[1].Truthy();
    const bool case_sensitive = a[name == "sort" ? 2 : 1].Truthy();
    const Value& attribute = a[name == "sort" ? 3 : 2];
    ASSIGN_OR_RETURN(std::vector<Value> items, Iterate(a[0]));
    std::vector<std::pair<Value, Value>> keyed;  // key, item
    for (const Value& item : items) {
      Value key = item;
      if (IsPresent(attribute)) {
        ASSIGN_OR_RETURN(key, GetPath(item, attribute));
      }
      if (!case_sensitive && key.is_string()) {
        key = Value::String(Lower(key.text()));
      }
      keyed.emplace_back(std::move(key), item);
    }
    RETURN_IF_ERROR(Step(static_cast<int64_t>(keyed.size()) * 8));
    absl::Status error;
    const auto less = [&](const Value& x, const Value& y) {
      if (!error.ok()) return false;
      absl::StatusOr<bool> r = Less(x, y);
      if (!r.ok()) {
        error = r.status();
        return false;
      }
      return *r;
    };
    if (name == "unique") {
      std::vector<Value> out;
      std::vector<Value> seen;
      for (auto& [key, item] : keyed) {
        bool dup = false;
        for (const Value& s : seen) {
          if (Equal(s, key)) {
            dup = true;
            break;
          }
        }
        if (dup) continue;
        RETURN_IF_ERROR(Step(static_cast<int64_t>(seen.size())));
        seen.push_back(key);
        out.push_back(item);
      }
      return MakeList(std::move(out));
    }
    if (name == "min" || name == "max") {
      if (keyed.empty()) {
        return Value::Undefined("No aggregated item, sequence was empty.");
      }
      size_t best = 0;
      for (size_t i = 1; i < keyed.size(); ++i) {
        const bool better = name == "min"
                                ? less(keyed[i].first, keyed[best].first)
                                : less(keyed[best].first, keyed[i].first);
        if (better) best = i;
      }
      if (!error.ok()) return error;
      return keyed[best].second;
    }
    std::stable_sort(
        keyed.begin(), keyed.end(), [&](const auto& x, const auto& y) {
          return reverse ? less(y.first, x.first) : less(x.first, y.first);
        });
    if (!error.ok()) return error;
    std::vector<Value> out;
    for (auto& [key, item] : keyed) out.push_back(std::move(item));
    return MakeList(std::move(out));
  }
  if (name == "dictsort") {
    ASSIGN_OR_RETURN(auto a, bind({{"value"},
                                   {"case_sensitive", Value::Bool(false)},
                                   {"by", Value::String("key")},
                                   {"reverse", Value::Bool(false)}}));
    if (!a[0].is_dict()) return Invalid("dictsort needs a dict");
    const bool by_value = a[2].is_string() && a[2].text() == "value";
    if (!by_value && !(a[2].is_string() && a[2].text() == "key")) {
      return Invalid("You can only sort by either \"key\" or \"value\"");
    }
    std::vector<std::pair<Value, Value>> items = a[0].dict().items;
    RETURN_IF_ERROR(Step(static_cast<int64_t>(items.size()) * 8));
    absl::Status error;
    const auto key = [&](const std::pair<Value, Value>& item) {
      const Value& k = by_value ? item.second : item.first;
      if (!a[1].Truthy() && k.is_string())
        return Value::String(Lower(k.text()));
      return k;
    };
    std::stable_sort(
        items.begin(), items.end(), [&](const auto& x, const auto& y) {
          if (!error.ok()) return false;
          absl::StatusOr<bool> r =
              a[3].Truthy() ? Less(key(y), key(x)) : Less(key(x), key(y));
          if (!r.ok()) {
            error = r.status();
            return false;
          }
          return *r;
        });
    if (!error.ok()) return error;
    std::vector<Value> out;
    for (auto& [k, v] : items) {
      ASSIGN_OR_RETURN(Value pair, Value::Tuple({k, v}));
      out.push_back(std::move(pair));
    }
    return MakeList(std::move(out));
  }
  if (name == "sum") {
    ASSIGN_OR_RETURN(auto a, bind({{"iterable"},
                                   {"attribute", Value::None()},
                                   {"start", Value::Int(0)}}));
    ASSIGN_OR_RETURN(std::vector<Value> items, Iterate(a[0]));
    Value total = a[2];
    for (const Value& item : items) {
      Value v = item;
      if (IsPresent(a[1])) {
        ASSIGN_OR_RETURN(v, GetPath(item, a[1]));
      }
      ASSIGN_OR_RETURN(total, Binary("+", total, v));
    }
    return total;
  }
  if (name == "truncate") {
    ASSIGN_OR_RETURN(auto a, bind({{"s"},
                                   {"length", Value::Int(255)},
                                   {"killwords", Value::Bool(false)},
                                   {"end", Value::String("...")},
                                   {"leeway", Value::None()}}));
    const Str s = StrOf(a[0]);
    ASSIGN_OR_RETURN(int64_t length, IntArg(a[1], "truncate's length"));
    int64_t leeway = 5;
    if (IsPresent(a[4])) {
      ASSIGN_OR_RETURN(leeway, IntArg(a[4], "truncate's leeway"));
    }
    const std::string end = StrOf(a[3]).text;
    const std::vector<size_t> offsets = CodePointOffsets(s.text);
    const int64_t n = static_cast<int64_t>(offsets.size()) - 1;
    if (length < static_cast<int64_t>(CodePointCount(end))) {
      return Invalid("expected length >= the length of end");
    }
    if (leeway < 0) return Invalid("expected leeway >= 0");
    if (n <= length + leeway) return a[0].is_string() ? a[0] : Value::String(s);
    const int64_t keep = length - static_cast<int64_t>(CodePointCount(end));
    std::string head = s.text.substr(0, offsets[static_cast<size_t>(keep)]);
    if (!a[2].Truthy()) {
      const size_t space = head.rfind(' ');
      if (space != std::string::npos) head.resize(space);
    }
    return MakeString(Derived(head + end, {&a[0]}));
  }
  if (In(kUnsupportedFilters, name)) {
    return Invalid(absl::StrCat("the filter '", name,
                                "' is not supported in chat templates"));
  }
  return Invalid(absl::StrCat("No filter named '", name, "'."));
}

absl::StatusOr<bool> Renderer::Test(const std::string& name,
                                    const Value& subject, Args args,
                                    Kwargs kwargs) {
  using Kind = Value::Kind;
  const Value& v = subject;
  const auto one = [&]() -> absl::StatusOr<Value> {
    ASSIGN_OR_RETURN(auto a, BindArgs(name, std::move(args), std::move(kwargs),
                                      {{"other"}}));
    return a[0];
  };
  if (name == "defined") return !v.is_undefined();
  if (name == "undefined") return v.is_undefined();
  if (name == "none") return v.is_none();
  if (name == "boolean") return v.kind() == Kind::kBool;
  if (name == "false") return v.kind() == Kind::kBool && !v.bool_value();
  if (name == "true") return v.kind() == Kind::kBool && v.bool_value();
  if (name == "integer") return v.kind() == Kind::kInt;
  if (name == "float") return v.kind() == Kind::kFloat;
  if (name == "number") return v.is_number();
  if (name == "string") return v.is_string();
  if (name == "mapping") return v.is_dict();
  if (name == "iterable") {
    return v.is_string() || v.is_sequence() || v.is_dict() ||
           v.is_undefined() || (v.is_namespace() && v.ns().loop);
  }
  if (name == "sequence") {
    return v.is_string() || v.is_sequence() || v.is_dict() || v.is_undefined();
  }
  if (name == "callable") return v.is_callable() || v.is_undefined();
  if (name == "escaped") return false;
  if (name == "filter" || name == "test") {
    if (!v.is_string()) return false;
    return name == "filter" ? HasFilter(v.text()) : HasTest(v.text());
  }
  if (name == "lower" || name == "upper") {
    bool cased = false;
    for (uint32_t c : CodePoints(StrOf(v).text)) {
      if (name == "lower" ? IsUpperCase(c) : IsLowerCase(c)) return false;
      cased = cased || IsCased(c);
    }
    return cased;
  }
  if (name == "odd" || name == "even") {
    ASSIGN_OR_RETURN(Value r, Binary("%", v, Value::Int(2)));
    return Equal(r, Value::Int(name == "odd" ? 1 : 0));
  }
  if (name == "divisibleby") {
    ASSIGN_OR_RETURN(Value num, one());
    ASSIGN_OR_RETURN(Value r, Binary("%", v, num));
    return Equal(r, Value::Int(0));
  }
  if (name == "sameas") {
    ASSIGN_OR_RETURN(Value other, one());
    return v.SameAs(other);
  }
  if (name == "in") {
    ASSIGN_OR_RETURN(Value seq, one());
    return CompareOp("in", v, seq);
  }
  static constexpr std::pair<std::string_view, std::string_view> kCompare[] = {
      {"eq", "=="}, {"equalto", "=="}, {"==", "=="},      {"ne", "!="},
      {"!=", "!="}, {"lt", "<"},       {"lessthan", "<"}, {"<", "<"},
      {"le", "<="}, {"<=", "<="},      {"gt", ">"},       {"greaterthan", ">"},
      {">", ">"},   {"ge", ">="},      {">=", ">="}};
  for (const auto& [test, op] : kCompare) {
    if (name == test) {
      ASSIGN_OR_RETURN(Value other, one());
      return CompareOp(std::string(op), v, other);
    }
  }
  return Invalid(absl::StrCat("No test named '", name, "'."));
}

absl::StatusOr<Value> Renderer::CallGlobal(const std::string& name, Args args,
                                           Kwargs kwargs) {
  if (name == "raise_exception") {
    ASSIGN_OR_RETURN(auto a, BindArgs(name, std::move(args), std::move(kwargs),
                                      {{"message"}}));
    return absl::AbortedError(StrOf(a[0]).text);
  }
  if (name == "range") {
    if (!kwargs.empty()) return Invalid("range() takes no keyword arguments");
    if (args.empty() || args.size() > 3) {
      return Invalid(
          absl::StrCat("range expected 1 to 3 arguments, got ", args.size()));
    }
    int64_t bounds[3] = {0, 0, 1};
    for (size_t i = 0; i < args.size(); ++i) {
      if (!args[i].is_integral()) {
        return Invalid(absl::StrCat("'", args[i].TypeName(),
                                    "' object cannot be interpreted as an "
                                    "integer"));
      }
    }
    if (args.size() == 1) {
      bounds[1] = args[0].int_value();
    } else {
      bounds[0] = args[0].int_value();
      bounds[1] = args[1].int_value();
      if (args.size() == 3) bounds[2] = args[2].int_value();
    }
    const auto [start, stop, step] = bounds;
    if (step == 0) return Invalid("range() arg 3 must not be zero");
    // The length, without overflow.
    const long double span = static_cast<long double>(stop) - start;
    const long double count =
        span / step > 0 ? std::ceil(span / static_cast<long double>(step)) : 0;
    if (count > kMaxRange) {
      return absl::ResourceExhaustedError(absl::StrCat(
          "Range too big. The sandbox blocks ranges larger than MAX_RANGE (",
          kMaxRange, ")."));
    }
    std::vector<Value> items;
    for (int64_t i = 0; i < static_cast<int64_t>(count); ++i) {
      items.push_back(Value::Int(start + i * step));
    }
    RETURN_IF_ERROR(Step(static_cast<int64_t>(items.size())));
    return MakeList(std::move(items));
  }
  if (name == "namespace" || name == "dict") {
    if (args.size() > 1) {
      return Invalid(absl::StrCat(name,
                                  "() takes at most one positional "
                                  "argument"));
    }
    std::vector<std::pair<Value, Value>> items;
    if (!args.empty()) {
      if (args[0].is_dict()) {
        items = args[0].dict().items;
      } else {
        ASSIGN_OR_RETURN(std::vector<Value> pairs, Iterate(args[0]));
        for (const Value& pair : pairs) {
          ASSIGN_OR_RETURN(std::vector<Value> kv, Iterate(pair));
          if (kv.size() != 2) {
            return Invalid(absl::StrCat(name, "() needs pairs, got one of ",
                                        kv.size(), " items"));
          }
          items.emplace_back(kv[0], kv[1]);
        }
      }
    }
    for (auto& [k, v] : kwargs) items.emplace_back(Value::String(k), v);
    if (name == "dict") return Value::Dict(std::move(items));
    auto ns = std::make_shared<NamespaceData>();
    for (auto& [k, v] : items) {
      if (!k.is_string()) return Invalid("namespace() keys must be strings");
      if (ContainsNamespace(v)) {
        return Invalid(
            "a namespace attribute cannot hold a namespace or a "
            "loop object");
      }
      ns->Set(k.text(), std::move(v));
    }
    return Value::Namespace(std::move(ns));
  }
  if (name == "strftime_now") {
    ASSIGN_OR_RETURN(auto a, BindArgs(name, std::move(args), std::move(kwargs),
                                      {{"format"}}));
    if (!a[0].is_string()) return Invalid("strftime_now needs a format string");
    if (a[0].text().size() > 256) {
      return Invalid("strftime_now's format is over 256 bytes");
    }
    const std::time_t t = absl::ToTimeT(now_);
    std::tm tm{};
    localtime_r(&t, &tm);
    char buf[2048];
    const size_t n = std::strftime(buf, sizeof(buf), a[0].text().c_str(), &tm);
    return MakeString(Trusted(std::string(buf, n)));
  }
  return Invalid(absl::StrCat("the function '", name,
                              "' is not supported in chat templates"));
}

absl::StatusOr<Value> Renderer::CallMethod(const Value& self,
                                           const std::string& name, Args args,
                                           Kwargs kwargs) {
  const std::string function = absl::StrCat(self.TypeName(), ".", name);
  if (self.is_string()) {
    return StrMethod(self, name, std::move(args), std::move(kwargs));
  }
  if (self.is_dict()) {
    if (name == "get") {
      ASSIGN_OR_RETURN(auto a,
                       BindArgs(function, std::move(args), std::move(kwargs),
                                {{"key"}, {"default", Value::None()}}));
      if (const Value* v = self.dict().Find(a[0])) return *v;
      return a[1];
    }
    if (!args.empty() || !kwargs.empty()) {
      return Invalid(absl::StrCat(function, "() takes no arguments"));
    }
    RETURN_IF_ERROR(Step(static_cast<int64_t>(self.dict().items.size())));
    if (name == "copy") return self;
    std::vector<Value> out;
    for (const auto& [k, v] : self.dict().items) {
      if (name == "keys") {
        out.push_back(k);
      } else if (name == "values") {
        out.push_back(v);
      } else {
        ASSIGN_OR_RETURN(Value pair, Value::Tuple({k, v}));
        out.push_back(std::move(pair));
      }
    }
    return MakeList(std::move(out));
  }
  if (self.is_sequence()) {
    if (name == "copy") return self;
    ASSIGN_OR_RETURN(auto a, BindArgs(function, std::move(args),
                                      std::move(kwargs), {{"value"}}));
    RETURN_IF_ERROR(Step(static_cast<int64_t>(self.items().size())));
    int64_t count = 0;
    for (size_t i = 0; i < self.items().size(); ++i) {
      if (!Equal(self.items()[i], a[0])) continue;
      if (name == "index") return Value::Int(static_cast<int64_t>(i));
      ++count;
    }
    if (name == "index") {
      return Invalid(absl::StrCat(ReprOf(a[0]), " is not in list"));
    }
    return Value::Int(count);
  }
  if (self.is_namespace() && self.ns().loop && name == "cycle") {
    if (args.empty()) return Invalid("no items for cycling given");
    const Value* index0 = self.ns().Find("index0");
    const int64_t i = index0 != nullptr ? index0->int_value() : 0;
    return args[static_cast<size_t>(i % static_cast<int64_t>(args.size()))];
  }
  return Invalid(absl::StrCat(function,
                              "() is not supported in chat "
                              "templates"));
}

absl::StatusOr<Value> Renderer::StrMethod(const Value& self,
                                          const std::string& name, Args args,
                                          Kwargs kwargs) {
  const std::string function = absl::StrCat("str.", name);
  const Str& s = self.str();
  const auto bind = [&](std::vector<Param> params) {
    return BindArgs(function, std::move(args), std::move(kwargs), params);
  };
  if (name == "strip" || name == "lstrip" || name == "rstrip") {
    ASSIGN_OR_RETURN(auto a, bind({{"chars", Value::None()}}));
    if (IsPresent(a[0]) && !a[0].is_string()) {
      return Invalid(absl::StrCat(function, " arg must be None or str"));
    }
    const auto [b, e] =
        StripRange(s.text, a[0], name != "rstrip", name != "lstrip");
    return Value::String(Substr(s, b, e));
  }
  if (name == "split" || name == "rsplit") {
    ASSIGN_OR_RETURN(
        auto a, bind({{"sep", Value::None()}, {"maxsplit", Value::Int(-1)}}));
    ASSIGN_OR_RETURN(int64_t maxsplit, IntArg(a[1], "maxsplit"));
    if (maxsplit < 0) maxsplit = std::numeric_limits<int64_t>::max();
    std::vector<std::pair<size_t, size_t>> parts;
    if (IsPresent(a[0])) {
      if (!a[0].is_string()) return Invalid("must be str or None");
      const std::string& sep = a[0].text();
      if (sep.empty()) return Invalid("empty separator");
      if (name == "split") {
        size_t pos = 0;
        while (static_cast<int64_t>(parts.size()) < maxsplit) {
          const size_t found = s.text.find(sep, pos);
          if (found == std::string::npos) break;
          parts.emplace_back(pos, found);
          pos = found + sep.size();
        }
        parts.emplace_back(pos, s.text.size());
      } else {
        size_t end = s.text.size();
        int64_t splits = 0;
        while (splits < maxsplit && end >= sep.size()) {
          const size_t found = s.text.rfind(sep, end - sep.size());
          if (found == std::string::npos) break;
          parts.emplace_back(found + sep.size(), end);
          end = found;
          ++splits;
        }
        parts.emplace_back(0, end);
        std::reverse(parts.begin(), parts.end());
      }
    } else {
      // Runs of whitespace; none at the ends.
      const std::vector<size_t> offsets = CodePointOffsets(s.text);
      std::vector<std::pair<size_t, size_t>> words;
      size_t i = 0;
      const size_t n = offsets.size() - 1;
      const auto space = [&](size_t k) {
        size_t len = 1;
        return IsSpace(DecodeAt(s.text, offsets[k], &len));
      };
      while (i < n) {
        while (i < n && space(i)) ++i;
        if (i == n) break;
        size_t j = i;
        while (j < n && !space(j)) ++j;
        words.emplace_back(i, j);
        i = j;
      }
      if (name == "split") {
        for (size_t w = 0; w < words.size(); ++w) {
          if (static_cast<int64_t>(w) == maxsplit) {
            // The rest as it is, but its leading whitespace.
            parts.emplace_back(offsets[words[w].first], offsets[n]);
            break;
          }
          parts.emplace_back(offsets[words[w].first], offsets[words[w].second]);
        }
      } else {
        const int64_t total = static_cast<int64_t>(words.size());
        for (int64_t w = total - 1; w >= 0; --w) {
          if (total - 1 - w == maxsplit) {
            parts.emplace_back(offsets[0], offsets[words[w].second]);
            break;
          }
          parts.emplace_back(offsets[words[w].first], offsets[words[w].second]);
        }
        std::reverse(parts.begin(), parts.end());
      }
    }
    RETURN_IF_ERROR(Step(static_cast<int64_t>(parts.size())));
    std::vector<Value> out;
    for (const auto& [b, e] : parts)
      out.push_back(Value::String(Substr(s, b, e)));
    return MakeList(std::move(out));
  }
  if (name == "startswith" || name == "endswith") {
    ASSIGN_OR_RETURN(auto a, bind({{"prefix"}}));
    std::vector<Value> options;
    if (a[0].is_string()) {
      options.push_back(a[0]);
    } else if (a[0].kind() == Value::Kind::kTuple) {
      options = a[0].items();
    } else {
      return Invalid(absl::StrCat(name,
                                  " first arg must be str or a tuple of "
                                  "str, not ",
                                  a[0].TypeName()));
    }
    for (const Value& o : options) {
      if (!o.is_string()) {
        return Invalid(absl::StrCat(
            "tuple for ", name, " must only contain str, not ", o.TypeName()));
      }
      const std::string& t = o.text();
      const bool hit =
          t.size() <= s.text.size() &&
          (name == "startswith"
               ? s.text.compare(0, t.size(), t) == 0
               : s.text.compare(s.text.size() - t.size(), t.size(), t) == 0);
      if (hit) return Value::Bool(true);
    }
    return Value::Bool(false);
  }
  if (name == "upper" || name == "lower" || name == "title" ||
      name == "capitalize") {
    ASSIGN_OR_RETURN(auto a, bind({}));
    std::string out = name == "upper"   ? Upper(s.text)
                      : name == "lower" ? Lower(s.text)
                      : name == "title" ? PyTitle(s.text)
                                        : Capitalize(s.text);
    return MakeString(WithTaint(std::move(out), s.any_untrusted()));
  }
  if (name == "replace") {
    ASSIGN_OR_RETURN(auto a,
                     bind({{"old"}, {"new"}, {"count", Value::Int(-1)}}));
    if (!a[0].is_string() || !a[1].is_string()) {
      return Invalid("replace() arguments must be str");
    }
    ASSIGN_OR_RETURN(int64_t count, IntArg(a[2], "count"));
    RETURN_IF_ERROR(
        Reserve(ReplacedSize(s.text, a[0].text(), a[1].text(), count)));
    return Value::String(Derived(
        Replace(s.text, a[0].text(), a[1].text(), count), {&self, &a[1]}));
  }
  if (name == "find" || name == "rfind" || name == "index" ||
      name == "rindex" || name == "count") {
    ASSIGN_OR_RETURN(auto a, bind({{"sub"}}));
    if (!a[0].is_string()) {
      return Invalid(absl::StrCat("must be str, not ", a[0].TypeName()));
    }
    const std::string& sub = a[0].text();
    if (name == "count") {
      if (sub.empty()) {
        return Value::Int(static_cast<int64_t>(CodePointCount(s.text)) + 1);
      }
      int64_t n = 0;
      for (size_t pos = s.text.find(sub); pos != std::string::npos;
           pos = s.text.find(sub, pos + sub.size())) {
        ++n;
      }
      return Value::Int(n);
    }
    const size_t found = name[0] == 'r' ? s.text.rfind(sub) : s.text.find(sub);
    if (found == std::string::npos) {
      if (name == "index" || name == "rindex") {
        return Invalid("substring not found");
      }
      return Value::Int(-1);
    }
    return Value::Int(static_cast<int64_t>(
        CodePointCount(std::string_view(s.text).substr(0, found))));
  }
  if (name == "join") {
    ASSIGN_OR_RETURN(auto a, bind({{"iterable"}}));
    ASSIGN_OR_RETURN(std::vector<Value> items, Iterate(a[0]));
    Str out;
    for (size_t i = 0; i < items.size(); ++i) {
      if (!items[i].is_string()) {
        return Invalid(absl::StrCat("sequence item ", i,
                                    ": expected str instance, ",
                                    items[i].TypeName(), " found"));
      }
      RETURN_IF_ERROR(
          Reserve(out.text.size() + items[i].text().size() + s.text.size()));
      if (i > 0) Append(&out, s);
      Append(&out, items[i].str());
    }
    return Value::String(std::move(out));
  }
  if (name == "splitlines") {
    ASSIGN_OR_RETURN(auto a, bind({{"keepends", Value::Bool(false)}}));
    std::vector<Value> out;
    for (std::string& line : SplitLines(s.text, a[0].Truthy())) {
      out.push_back(
          Value::String(WithTaint(std::move(line), s.any_untrusted())));
    }
    return MakeList(std::move(out));
  }
  if (name == "removeprefix" || name == "removesuffix") {
    ASSIGN_OR_RETURN(auto a, bind({{"affix"}}));
    if (!a[0].is_string()) return Invalid(absl::StrCat(name, " needs a str"));
    const std::string& t = a[0].text();
    if (name == "removeprefix" && s.text.compare(0, t.size(), t) == 0 &&
        t.size() <= s.text.size()) {
      return Value::String(Substr(s, t.size(), s.text.size()));
    }
    if (name == "removesuffix" && t.size() <= s.text.size() &&
        s.text.compare(s.text.size() - t.size(), t.size(), t) == 0 &&
        !t.empty()) {
      return Value::String(Substr(s, 0, s.text.size() - t.size()));
    }
    return self;
  }
  if (name == "isspace" || name == "isdigit" || name == "isalpha" ||
      name == "isalnum" || name == "islower" || name == "isupper") {
    ASSIGN_OR_RETURN(auto a, bind({}));
    const std::vector<uint32_t> cps = CodePoints(s.text);
    if (name == "islower" || name == "isupper") {
      ASSIGN_OR_RETURN(bool r, Test(name.substr(2), self, {}, {}));
      return Value::Bool(r);
    }
    if (cps.empty()) return Value::Bool(false);
    for (uint32_t c : cps) {
      const auto u = static_cast<UChar32>(c);
      const bool ok = name == "isspace"   ? IsSpace(c)
                      : name == "isdigit" ? u_isdigit(u) != 0
                      : name == "isalpha" ? u_isalpha(u) != 0
                                          : u_isalnum(u) != 0;
      if (!ok) return Value::Bool(false);
    }
    return Value::Bool(true);
  }
  if (name == "center" || name == "ljust" || name == "rjust" ||
      name == "zfill") {
    std::vector<Param> params = {{"width"}};
    if (name != "zfill") params.push_back({"fillchar", Value::String(" ")});
    ASSIGN_OR_RETURN(auto a, bind(params));
    ASSIGN_OR_RETURN(int64_t width, IntArg(a[0], "width"));
    std::string fill = " ";
    if (name != "zfill") {
      if (!a[1].is_string() || CodePointCount(a[1].text()) != 1) {
        return Invalid(
            "The fill character must be exactly one character "
            "long");
      }
      fill = a[1].text();
    }
    const int64_t len = static_cast<int64_t>(CodePointCount(s.text));
    if (width <= len) return self;
    if (width > static_cast<int64_t>(limits_.max_output_bytes)) {
      return Reserve(static_cast<size_t>(width));
    }
    const int64_t margin = width - len;
    int64_t left = 0;
    if (name == "center") {
      left = margin / 2 + (margin & width & 1);
    } else if (name == "rjust" || name == "zfill") {
      left = margin;
    }
    const int64_t right = margin - left;
    RETURN_IF_ERROR(
        Reserve(s.text.size() + static_cast<size_t>(margin) * fill.size()));
    std::string out;
    if (name == "zfill") {
      std::string_view body = s.text;
      if (!body.empty() && (body[0] == '+' || body[0] == '-')) {
        out.push_back(body[0]);
        body.remove_prefix(1);
      }
      out.append(static_cast<size_t>(left), '0');
      out.append(body);
    } else {
      for (int64_t i = 0; i < left; ++i) out += fill;
      out += s.text;
      for (int64_t i = 0; i < right; ++i) out += fill;
    }
    return Value::String(Derived(std::move(out), {&self}));
  }
  return Invalid(absl::StrCat(function,
                              "() is not supported in chat "
                              "templates"));
}

absl::StatusOr<Value> Renderer::Format(const Value& format,
                                       const Value& arguments) {
  const std::string& f = format.text();
  std::vector<Value> positional;
  const DictData* mapping = nullptr;
  if (arguments.kind() == Value::Kind::kTuple) {
    positional = arguments.items();
  } else if (arguments.is_dict()) {
    mapping = &arguments.dict();
  } else {
    positional.push_back(arguments);
  }
  size_t next = 0;
  std::string out;
  size_t i = 0;
  while (i < f.size()) {
    if (f[i] != '%') {
      out.push_back(f[i++]);
      continue;
    }
    ++i;
    if (i >= f.size()) return Invalid("incomplete format");
    const Value* arg = nullptr;
    if (f[i] == '(') {
      const size_t close = f.find(')', i);
      if (close == std::string::npos) return Invalid("incomplete format key");
      if (mapping == nullptr) return Invalid("format requires a mapping");
      const Value* v =
          mapping->Find(Value::String(f.substr(i + 1, close - i - 1)));
      if (v == nullptr) {
        return Invalid(
            absl::StrCat("KeyError: ", Repr(f.substr(i + 1, close - i - 1))));
      }
      arg = v;
      i = close + 1;
    }
    std::string flags;
    while (i < f.size() &&
           std::string_view("-+ #0").find(f[i]) != std::string_view::npos) {
      flags.push_back(f[i++]);
    }
    int64_t width = 0;
    while (i < f.size() && absl::ascii_isdigit(f[i])) {
      width = std::min<int64_t>(width * 10 + (f[i++] - '0'), 1 << 20);
    }
    int precision = -1;
    if (i < f.size() && f[i] == '.') {
      ++i;
      precision = 0;
      while (i < f.size() && absl::ascii_isdigit(f[i])) {
        precision = std::min(precision * 10 + (f[i++] - '0'), 1 << 10);
      }
    }
    if (i >= f.size()) return Invalid("incomplete format");
    const char conversion = f[i++];
    if (conversion == '%') {
      out.push_back('%');
      continue;
    }
    if (arg == nullptr) {
      if (mapping != nullptr) {
        arg = &arguments;
      } else {
        if (next >= positional.size()) {
          return Invalid("not enough arguments for format string");
        }
        arg = &positional[next++];
      }
    }
    std::string piece;
    const bool left = flags.find('-') != std::string::npos;
    bool zero = flags.find('0') != std::string::npos && !left;
    char buf[1200];
    switch (conversion) {
      case 's':
      case 'r':
        piece = conversion == 's' ? StrOf(*arg).text : ReprOf(*arg);
        if (precision >= 0) {
          const std::vector<size_t> offsets = CodePointOffsets(piece);
          if (static_cast<size_t>(precision) + 1 < offsets.size()) {
            piece.resize(offsets[static_cast<size_t>(precision)]);
          }
        }
        zero = false;
        break;
      case 'd':
      case 'i':
      case 'x':
      case 'X':
      case 'o': {
        if (!arg->is_number()) {
          return Invalid(absl::StrCat("%", std::string(1, conversion),
                                      " format: a number is required, not ",
                                      arg->TypeName()));
        }
        int64_t n = 0;
        if (arg->is_integral()) {
          n = arg->int_value();
        } else if (std::fabs(arg->number()) < 9.2e18) {
          n = static_cast<int64_t>(arg->number());
        } else {
          return Invalid("the number is too large to format as an integer");
        }
        const char* spec = conversion == 'x'   ? "%llx"
                           : conversion == 'X' ? "%llX"
                           : conversion == 'o' ? "%llo"
                                               : "%llu";
        const unsigned long long magnitude =
            n < 0 ? 0ULL - static_cast<unsigned long long>(n)
                  : static_cast<unsigned long long>(n);
        std::snprintf(buf, sizeof(buf), spec, magnitude);
        piece = buf;
        if (precision >= 0 && piece.size() < static_cast<size_t>(precision)) {
          piece.insert(0, static_cast<size_t>(precision) - piece.size(), '0');
        }
        if (n < 0) {
          piece.insert(0, "-");
        } else if (flags.find('+') != std::string::npos) {
          piece.insert(0, "+");
        } else if (flags.find(' ') != std::string::npos) {
          piece.insert(0, " ");
        }
        break;
      }
      case 'f':
      case 'F':
      case 'e':
      case 'E':
      case 'g':
      case 'G': {
        if (!arg->is_number()) {
          return Invalid(
              absl::StrCat("must be real number, not ", arg->TypeName()));
        }
        const std::string spec = absl::StrCat(
            "%", flags.find('+') != std::string::npos ? "+" : "",
            flags.find(' ') != std::string::npos ? " " : "",
            flags.find('#') != std::string::npos ? "#" : "", ".",
            precision < 0 ? 6 : precision, std::string(1, conversion));
        std::snprintf(buf, sizeof(buf), spec.c_str(), arg->number());
        piece = buf;
        break;
      }
      case 'c':
        if (arg->is_integral() && arg->int_value() >= 0 &&
            arg->int_value() <= 0x10FFFF) {
          AppendUtf8(static_cast<uint32_t>(arg->int_value()), &piece);
        } else if (arg->is_string() && CodePointCount(arg->text()) == 1) {
          piece = arg->text();
        } else {
          return Invalid("%c requires an int or a unicode character");
        }
        zero = false;
        break;
      default:
        return Invalid(absl::StrCat("unsupported format character '",
                                    std::string(1, conversion), "'"));
    }
    const int64_t len = static_cast<int64_t>(CodePointCount(piece));
    if (width > len) {
      const size_t pad = static_cast<size_t>(width - len);
      if (left) {
        piece.append(pad, ' ');
      } else if (zero) {
        const size_t sign =
            !piece.empty() &&
                    (piece[0] == '-' || piece[0] == '+' || piece[0] == ' ')
                ? 1
                : 0;
        piece.insert(sign, pad, '0');
      } else {
        piece.insert(0, pad, ' ');
      }
    }
    RETURN_IF_ERROR(Reserve(out.size() + piece.size()));
    out += piece;
  }
  if (mapping == nullptr && next < positional.size()) {
    return Invalid("not all arguments converted during string formatting");
  }
  return MakeString(Derived(std::move(out), {&format, &arguments}));
}

}  // namespace seqboat::jinja
