// Jinja's filters of text: each takes its subject as a string (soft_str)
// and keeps which of its bytes came from outside the template.
#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "server/jinja/builtins.h"
#include "server/jinja/text_ops.h"
#include "unicode/uchar.h"

namespace seqboat::jinja {
namespace {

absl::StatusOr<Value> Trim(Renderer& r, BuiltinCall call) {
  ASSIGN_OR_RETURN(auto a,
                   BindFilter(call, {{"value"}, {"chars", Value::None()}}));
  const Str s = StrOf(a[0]);
  const auto [b, e] = StripRange(s.text, a[1], true, true);
  return r.MakeString(Substr(s, b, e));
}

// tojson's indent and separators as json.dumps takes them.
absl::StatusOr<JsonOptions> JsonOptionsOf(const std::vector<Value>& a) {
  JsonOptions options;
  options.ensure_ascii = a[1].Truthy();
  if (a[2].is_integral()) {
    options.indent = std::string(
        static_cast<size_t>(std::clamp<int64_t>(a[2].int_value(), 0, 64)), ' ');
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
  return options;
}

absl::StatusOr<Value> ToJsonFilter(Renderer& r, BuiltinCall call) {
  ASSIGN_OR_RETURN(auto a,
                   BindFilter(call, {{"x"},
                                     {"ensure_ascii", Value::Bool(false)},
                                     {"indent", Value::None()},
                                     {"separators", Value::None()},
                                     {"sort_keys", Value::Bool(false)}}));
  ASSIGN_OR_RETURN(const JsonOptions options, JsonOptionsOf(a));
  RETURN_IF_ERROR(r.Step(a[0].depth() + 1));
  ASSIGN_OR_RETURN(std::string json, ToJson(a[0], options));
  return r.MakeString(Derived(std::move(json), {&a[0]}));
}

// upper, lower, capitalize, title, and escape (with e and forceescape:
// nothing is marked safe here, so all escape): the text mapped by `kMap`.
template <std::string (*kMap)(std::string_view)>
absl::StatusOr<Value> MapText(Renderer& r, BuiltinCall call) {
  ASSIGN_OR_RETURN(auto a, BindFilter(call, {{"s"}}));
  const Str s = StrOf(a[0]);
  return r.MakeString(WithTaint(kMap(s.text), s.any_untrusted()));
}

absl::StatusOr<Value> WordCount(Renderer& r, BuiltinCall call) {
  ASSIGN_OR_RETURN(auto a, BindFilter(call, {{"s"}}));
  int64_t words = 0;
  bool in_word = false;
  for (uint32_t c : CodePoints(StrOf(a[0]).text)) {
    const bool word = c == '_' || u_isalnum(static_cast<UChar32>(c));
    if (word && !in_word) ++words;
    in_word = word;
  }
  return Value::Int(words);
}

absl::StatusOr<Value> StringFilter(Renderer& r, BuiltinCall call) {
  ASSIGN_OR_RETURN(auto a, BindFilter(call, {{"value"}}));
  return r.MakeString(StrOf(a[0]));
}

absl::StatusOr<Value> Safe(Renderer& r, BuiltinCall call) {
  ASSIGN_OR_RETURN(auto a, BindFilter(call, {{"value"}}));
  return a[0];
}

// default and d.
absl::StatusOr<Value> Default(Renderer& r, BuiltinCall call) {
  ASSIGN_OR_RETURN(auto a,
                   BindFilter(call, {{"value"},
                                     {"default_value", Value::String("")},
                                     {"boolean", Value::Bool(false)}}));
  if (a[0].is_undefined() || (a[2].Truthy() && !a[0].Truthy())) return a[1];
  return a[0];
}

absl::StatusOr<Value> Join(Renderer& r, BuiltinCall call) {
  ASSIGN_OR_RETURN(auto a, BindFilter(call, {{"value"},
                                             {"d", Value::String("")},
                                             {"attribute", Value::None()}}));
  ASSIGN_OR_RETURN(std::vector<Value> items, r.Iterate(a[0]));
  const Str separator = StrOf(a[1]);
  Str out;
  for (size_t i = 0; i < items.size(); ++i) {
    Value item = items[i];
    if (IsPresent(a[2])) {
      ASSIGN_OR_RETURN(item, r.GetPath(item, a[2]));
    }
    const Str part = StrOf(item);
    RETURN_IF_ERROR(
        r.Reserve(out.text.size() + part.text.size() + separator.text.size()));
    if (i > 0) Append(&out, separator);
    Append(&out, part);
  }
  return Value::String(std::move(out));
}

absl::StatusOr<Value> ReplaceFilter(Renderer& r, BuiltinCall call) {
  ASSIGN_OR_RETURN(
      auto a,
      BindFilter(call, {{"s"}, {"old"}, {"new"}, {"count", Value::None()}}));
  int64_t count = -1;
  if (IsPresent(a[3])) {
    ASSIGN_OR_RETURN(count, IntArg(a[3], "replace's count"));
  }
  const Str s = StrOf(a[0]);
  const Str old = StrOf(a[1]);
  const Str replacement = StrOf(a[2]);
  RETURN_IF_ERROR(
      r.Reserve(ReplacedSize(s.text, old.text, replacement.text, count)));
  return Value::String(Derived(
      Replace(s.text, old.text, replacement.text, count), {&a[0], &a[2]}));
}

// str.center's, on the subject's text.
absl::StatusOr<Value> Center(Renderer& r, BuiltinCall call) {
  ASSIGN_OR_RETURN(auto a,
                   BindFilter(call, {{"value"}, {"width", Value::Int(80)}}));
  return r.CallMethod(Value::String(StrOf(a[0])), "center", {a[1]}, {});
}

absl::StatusOr<Value> Indent(Renderer& r, BuiltinCall call) {
  ASSIGN_OR_RETURN(auto a, BindFilter(call, {{"s"},
                                             {"width", Value::Int(4)},
                                             {"first", Value::Bool(false)},
                                             {"blank", Value::Bool(false)}}));
  std::string indention;
  if (a[1].is_string()) {
    indention = a[1].text();
  } else {
    ASSIGN_OR_RETURN(int64_t width, IntArg(a[1], "indent's width"));
    if (width > static_cast<int64_t>(r.limits().max_output_bytes)) {
      return r.Reserve(static_cast<size_t>(width));
    }
    indention.assign(static_cast<size_t>(std::max<int64_t>(0, width)), ' ');
  }
  const std::string s = StrOf(a[0]).text + "\n";
  const std::vector<std::string> lines = SplitLines(s, false);
  RETURN_IF_ERROR(r.Reserve(s.size() + lines.size() * indention.size()));
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
  return r.MakeString(Derived(std::move(out), {&a[0]}));
}

absl::StatusOr<Value> Truncate(Renderer& r, BuiltinCall call) {
  ASSIGN_OR_RETURN(auto a, BindFilter(call, {{"s"},
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
  return r.MakeString(Derived(head + end, {&a[0]}));
}

// Python's % with positional or keyword arguments, not both.
absl::StatusOr<Value> FormatFilter(Renderer& r, BuiltinCall call) {
  if (!call.args.empty() && !call.kwargs.empty()) {
    return Invalid(
        "format can't handle positional and keyword arguments "
        "at the same time");
  }
  Value arguments;
  if (!call.kwargs.empty()) {
    std::vector<std::pair<Value, Value>> items;
    for (auto& [k, v] : call.kwargs) items.emplace_back(Value::String(k), v);
    ASSIGN_OR_RETURN(arguments, Value::Dict(std::move(items)));
  } else {
    ASSIGN_OR_RETURN(arguments, Value::Tuple(std::move(call.args)));
  }
  return r.Format(Value::String(StrOf(call.self)), arguments);
}

constexpr Builtin<BuiltinFn> kTextFilters[] = {
    {"capitalize", MapText<Capitalize>},
    {"center", Center},
    {"d", Default},
    {"default", Default},
    {"e", MapText<Escape>},
    {"escape", MapText<Escape>},
    {"forceescape", MapText<Escape>},
    {"format", FormatFilter},
    {"indent", Indent},
    {"join", Join},
    {"lower", MapText<Lower>},
    {"replace", ReplaceFilter},
    {"safe", Safe},
    {"string", StringFilter},
    {"title", MapText<JinjaTitle>},
    {"tojson", ToJsonFilter},
    {"trim", Trim},
    {"truncate", Truncate},
    {"upper", MapText<Upper>},
    {"wordcount", WordCount},
};

}  // namespace

absl::Span<const Builtin<BuiltinFn>> TextFilters() { return kTextFilters; }

}  // namespace seqboat::jinja
