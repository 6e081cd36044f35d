// The str methods the sandbox allows, as Python 3 defines them over code
// points: the result keeps which bytes came from outside the template.
#include <algorithm>
#include <limits>
#include <utility>

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "server/jinja/builtins.h"
#include "server/jinja/text_ops.h"
#include "unicode/uchar.h"

namespace seqboat::jinja {
namespace {

// Byte ranges [begin, end) of the parts of a split.
using Parts = std::vector<std::pair<size_t, size_t>>;

// strip, lstrip and rstrip.
absl::StatusOr<Value> Strip(Renderer& /*r*/, BuiltinCall call) {
  const std::string function = MethodName(call);
  ASSIGN_OR_RETURN(auto a,
                   BindCall(call, function, {{"chars", Value::None()}}));
  if (IsPresent(a[0]) && !a[0].is_string()) {
    return Invalid(absl::StrCat(function, " arg must be None or str"));
  }
  const Str& s = call.self.str();
  const auto [b, e] =
      StripRange(s.text, a[0], call.name != "rstrip", call.name != "lstrip");
  return Value::String(Substr(s, b, e));
}

// split(sep) and rsplit(sep): at most `maxsplit` cuts, from the left or
// the right.
Parts SplitAt(const std::string& s, const std::string& sep, int64_t maxsplit,
              bool from_right) {
  Parts parts;
  if (!from_right) {
    size_t pos = 0;
    while (static_cast<int64_t>(parts.size()) < maxsplit) {
      const size_t found = s.find(sep, pos);
      if (found == std::string::npos) break;
      parts.emplace_back(pos, found);
      pos = found + sep.size();
    }
    parts.emplace_back(pos, s.size());
    return parts;
  }
  size_t end = s.size();
  int64_t splits = 0;
  while (splits < maxsplit && end >= sep.size()) {
    const size_t found = s.rfind(sep, end - sep.size());
    if (found == std::string::npos) break;
    parts.emplace_back(found + sep.size(), end);
    end = found;
    ++splits;
  }
  parts.emplace_back(0, end);
  std::reverse(parts.begin(), parts.end());
  return parts;
}

// split() and rsplit() without a separator: runs of whitespace, none at the
// ends; past `maxsplit` words the rest is one part as it is.
Parts SplitWords(const std::string& s, int64_t maxsplit, bool from_right) {
  const std::vector<size_t> offsets = CodePointOffsets(s);
  std::vector<std::pair<size_t, size_t>> words;  // code point ranges
  size_t i = 0;
  const size_t n = offsets.size() - 1;
  const auto space = [&](size_t k) {
    size_t len = 1;
    return IsSpace(DecodeAt(s, offsets[k], &len));
  };
  while (i < n) {
    while (i < n && space(i)) ++i;
    if (i == n) break;
    size_t j = i;
    while (j < n && !space(j)) ++j;
    words.emplace_back(i, j);
    i = j;
  }
  Parts parts;
  if (!from_right) {
    for (size_t w = 0; w < words.size(); ++w) {
      if (static_cast<int64_t>(w) == maxsplit) {
        // The rest as it is, but its leading whitespace.
        parts.emplace_back(offsets[words[w].first], offsets[n]);
        break;
      }
      parts.emplace_back(offsets[words[w].first], offsets[words[w].second]);
    }
    return parts;
  }
  const int64_t total = static_cast<int64_t>(words.size());
  for (int64_t w = total - 1; w >= 0; --w) {
    if (total - 1 - w == maxsplit) {
      parts.emplace_back(offsets[0], offsets[words[w].second]);
      break;
    }
    parts.emplace_back(offsets[words[w].first], offsets[words[w].second]);
  }
  std::reverse(parts.begin(), parts.end());
  return parts;
}

// split and rsplit.
absl::StatusOr<Value> Split(Renderer& r, BuiltinCall call) {
  ASSIGN_OR_RETURN(
      auto a, BindCall(call, MethodName(call),
                       {{"sep", Value::None()}, {"maxsplit", Value::Int(-1)}}));
  ASSIGN_OR_RETURN(int64_t maxsplit, IntArg(a[1], "maxsplit"));
  if (maxsplit < 0) maxsplit = std::numeric_limits<int64_t>::max();
  const Str& s = call.self.str();
  const bool from_right = call.name == "rsplit";
  Parts parts;
  if (IsPresent(a[0])) {
    if (!a[0].is_string()) return Invalid("must be str or None");
    if (a[0].text().empty()) return Invalid("empty separator");
    parts = SplitAt(s.text, a[0].text(), maxsplit, from_right);
  } else {
    parts = SplitWords(s.text, maxsplit, from_right);
  }
  RETURN_IF_ERROR(r.Step(static_cast<int64_t>(parts.size())));
  std::vector<Value> out;
  for (const auto& [b, e] : parts) {
    out.push_back(Value::String(Substr(s, b, e)));
  }
  return r.MakeList(std::move(out));
}

// startswith and endswith, of a str or of any of a tuple of them.
absl::StatusOr<Value> StartsOrEndsWith(Renderer& /*r*/, BuiltinCall call) {
  ASSIGN_OR_RETURN(auto a, BindCall(call, MethodName(call), {{"prefix"}}));
  const std::string& name = call.name;
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
  const std::string& s = call.self.text();
  for (const Value& o : options) {
    if (!o.is_string()) {
      return Invalid(absl::StrCat(
          "tuple for ", name, " must only contain str, not ", o.TypeName()));
    }
    const std::string& t = o.text();
    const bool hit = t.size() <= s.size() &&
                     (name == "startswith"
                          ? s.compare(0, t.size(), t) == 0
                          : s.compare(s.size() - t.size(), t.size(), t) == 0);
    if (hit) return Value::Bool(true);
  }
  return Value::Bool(false);
}

// upper, lower, title and capitalize: the text mapped by `kMap`.
template <std::string (*kMap)(std::string_view)>
absl::StatusOr<Value> MapText(Renderer& r, BuiltinCall call) {
  ASSIGN_OR_RETURN(auto a, BindCall(call, MethodName(call), {}));
  const Str& s = call.self.str();
  return r.MakeString(WithTaint(kMap(s.text), s.any_untrusted()));
}

absl::StatusOr<Value> ReplaceMethod(Renderer& r, BuiltinCall call) {
  ASSIGN_OR_RETURN(auto a,
                   BindCall(call, MethodName(call),
                            {{"old"}, {"new"}, {"count", Value::Int(-1)}}));
  if (!a[0].is_string() || !a[1].is_string()) {
    return Invalid("replace() arguments must be str");
  }
  ASSIGN_OR_RETURN(int64_t count, IntArg(a[2], "count"));
  const std::string& s = call.self.text();
  RETURN_IF_ERROR(r.Reserve(ReplacedSize(s, a[0].text(), a[1].text(), count)));
  return Value::String(Derived(Replace(s, a[0].text(), a[1].text(), count),
                               {&call.self, &a[1]}));
}

// count(sub): occurrences that do not overlap; "" is between every code
// point.
absl::StatusOr<Value> Count(const std::string& s, const std::string& sub) {
  if (sub.empty()) {
    return Value::Int(static_cast<int64_t>(CodePointCount(s)) + 1);
  }
  int64_t n = 0;
  for (size_t pos = s.find(sub); pos != std::string::npos;
       pos = s.find(sub, pos + sub.size())) {
    ++n;
  }
  return Value::Int(n);
}

// find, rfind, index, rindex and count: where `sub` is, in code points.
absl::StatusOr<Value> Find(Renderer& /*r*/, BuiltinCall call) {
  ASSIGN_OR_RETURN(auto a, BindCall(call, MethodName(call), {{"sub"}}));
  if (!a[0].is_string()) {
    return Invalid(absl::StrCat("must be str, not ", a[0].TypeName()));
  }
  const std::string& name = call.name;
  const std::string& s = call.self.text();
  const std::string& sub = a[0].text();
  if (name == "count") return Count(s, sub);
  const size_t found = name[0] == 'r' ? s.rfind(sub) : s.find(sub);
  if (found == std::string::npos) {
    if (name == "index" || name == "rindex") {
      return Invalid("substring not found");
    }
    return Value::Int(-1);
  }
  return Value::Int(static_cast<int64_t>(
      CodePointCount(std::string_view(s).substr(0, found))));
}

absl::StatusOr<Value> JoinMethod(Renderer& r, BuiltinCall call) {
  ASSIGN_OR_RETURN(auto a, BindCall(call, MethodName(call), {{"iterable"}}));
  ASSIGN_OR_RETURN(std::vector<Value> items, r.Iterate(a[0]));
  const Str& s = call.self.str();
  Str out;
  for (size_t i = 0; i < items.size(); ++i) {
    if (!items[i].is_string()) {
      return Invalid(absl::StrCat("sequence item ", i,
                                  ": expected str instance, ",
                                  items[i].TypeName(), " found"));
    }
    RETURN_IF_ERROR(
        r.Reserve(out.text.size() + items[i].text().size() + s.text.size()));
    if (i > 0) Append(&out, s);
    Append(&out, items[i].str());
  }
  return Value::String(std::move(out));
}

absl::StatusOr<Value> SplitLinesMethod(Renderer& r, BuiltinCall call) {
  ASSIGN_OR_RETURN(auto a, BindCall(call, MethodName(call),
                                    {{"keepends", Value::Bool(false)}}));
  const Str& s = call.self.str();
  std::vector<Value> out;
  for (std::string& line : SplitLines(s.text, a[0].Truthy())) {
    out.push_back(Value::String(WithTaint(std::move(line), s.any_untrusted())));
  }
  return r.MakeList(std::move(out));
}

// removeprefix and removesuffix.
absl::StatusOr<Value> RemoveAffix(Renderer& /*r*/, BuiltinCall call) {
  ASSIGN_OR_RETURN(auto a, BindCall(call, MethodName(call), {{"affix"}}));
  if (!a[0].is_string()) {
    return Invalid(absl::StrCat(call.name, " needs a str"));
  }
  const Str& s = call.self.str();
  const std::string& t = a[0].text();
  if (call.name == "removeprefix" && s.text.compare(0, t.size(), t) == 0 &&
      t.size() <= s.text.size()) {
    return Value::String(Substr(s, t.size(), s.text.size()));
  }
  if (call.name == "removesuffix" && t.size() <= s.text.size() &&
      s.text.compare(s.text.size() - t.size(), t.size(), t) == 0 &&
      !t.empty()) {
    return Value::String(Substr(s, 0, s.text.size() - t.size()));
  }
  return call.self;
}

// isspace, isdigit, isalpha and isalnum: not empty, and every code point
// of the class.
absl::StatusOr<Value> IsClass(Renderer& /*r*/, BuiltinCall call) {
  ASSIGN_OR_RETURN(auto a, BindCall(call, MethodName(call), {}));
  const std::vector<uint32_t> cps = CodePoints(call.self.text());
  if (cps.empty()) return Value::Bool(false);
  const std::string& name = call.name;
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

// islower and isupper: the lower and upper tests.
absl::StatusOr<Value> IsCase(Renderer& r, BuiltinCall call) {
  ASSIGN_OR_RETURN(auto a, BindCall(call, MethodName(call), {}));
  ASSIGN_OR_RETURN(bool result, r.Test(call.name.substr(2), call.self, {}, {}));
  return Value::Bool(result);
}

// center, ljust, rjust and zfill: padded to `width` code points.
absl::StatusOr<Value> Pad(Renderer& r, BuiltinCall call) {
  const std::string& name = call.name;
  std::vector<Param> params = {{"width"}};
  if (name != "zfill") params.push_back({"fillchar", Value::String(" ")});
  ASSIGN_OR_RETURN(auto a, BindCall(call, MethodName(call), params));
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
  const std::string& s = call.self.text();
  const int64_t len = static_cast<int64_t>(CodePointCount(s));
  if (width <= len) return call.self;
  if (width > static_cast<int64_t>(r.limits().max_output_bytes)) {
    return r.Reserve(static_cast<size_t>(width));
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
      r.Reserve(s.size() + static_cast<size_t>(margin) * fill.size()));
  std::string out;
  if (name == "zfill") {
    std::string_view body = s;
    if (!body.empty() && (body[0] == '+' || body[0] == '-')) {
      out.push_back(body[0]);
      body.remove_prefix(1);
    }
    out.append(static_cast<size_t>(left), '0');
    out.append(body);
  } else {
    for (int64_t i = 0; i < left; ++i) out += fill;
    out += s;
    for (int64_t i = 0; i < right; ++i) out += fill;
  }
  return Value::String(Derived(std::move(out), {&call.self}));
}

constexpr Builtin<BuiltinFn> kStrMethods[] = {
    {"capitalize", MapText<Capitalize>},
    {"center", Pad},
    {"count", Find},
    {"endswith", StartsOrEndsWith},
    {"find", Find},
    {"index", Find},
    {"isalnum", IsClass},
    {"isalpha", IsClass},
    {"isdigit", IsClass},
    {"islower", IsCase},
    {"isspace", IsClass},
    {"isupper", IsCase},
    {"join", JoinMethod},
    {"ljust", Pad},
    {"lower", MapText<Lower>},
    {"lstrip", Strip},
    {"removeprefix", RemoveAffix},
    {"removesuffix", RemoveAffix},
    {"replace", ReplaceMethod},
    {"rfind", Find},
    {"rindex", Find},
    {"rjust", Pad},
    {"rsplit", Split},
    {"rstrip", Strip},
    {"split", Split},
    {"splitlines", SplitLinesMethod},
    {"startswith", StartsOrEndsWith},
    {"strip", Strip},
    {"title", MapText<PyTitle>},
    {"upper", MapText<Upper>},
    {"zfill", Pad},
};

}  // namespace

absl::Span<const Builtin<BuiltinFn>> StrMethods() { return kStrMethods; }

}  // namespace seqboat::jinja
