// Attributes, items and slices of values, and iteration over them, as
// Jinja's sandbox allows: methods that change a value are unsafe, and a
// missing attribute or item is undefined rather than an error.
#include <algorithm>
#include <limits>
#include <memory>
#include <string_view>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "server/jinja/renderer.h"

namespace seqboat::jinja {
namespace {

// The methods each type's attributes show. Calling one that the method
// tables (builtins.h) lack is an error that names it.
constexpr std::string_view kStrMethods[] = {
    "capitalize",   "casefold",     "center",    "count",     "encode",
    "endswith",     "expandtabs",   "find",      "format",    "format_map",
    "index",        "isalnum",      "isalpha",   "isascii",   "isdecimal",
    "isdigit",      "isidentifier", "islower",   "isnumeric", "isprintable",
    "isspace",      "istitle",      "isupper",   "join",      "ljust",
    "lower",        "lstrip",       "maketrans", "partition", "removeprefix",
    "removesuffix", "replace",      "rfind",     "rindex",    "rjust",
    "rpartition",   "rsplit",       "rstrip",    "split",     "splitlines",
    "startswith",   "strip",        "swapcase",  "title",     "translate",
    "upper",        "zfill"};
constexpr std::string_view kDictMethods[] = {"copy", "get", "items", "keys",
                                             "values"};
constexpr std::string_view kListMethods[] = {"copy", "count", "index"};
constexpr std::string_view kTupleMethods[] = {"count", "index"};
// What ImmutableSandboxedEnvironment refuses: methods that change a value.
constexpr std::string_view kUnsafeDictMethods[] = {
    "clear", "fromkeys", "pop", "popitem", "setdefault", "update"};
constexpr std::string_view kUnsafeListMethods[] = {
    "append", "clear", "extend", "insert", "pop", "remove", "reverse", "sort"};

template <size_t N>
bool In(const std::string_view (&names)[N], std::string_view name) {
  return std::find(std::begin(names), std::end(names), name) != std::end(names);
}

Value Method(const Value& self, const std::string& name) {
  auto fn = std::make_shared<CallableData>();
  fn->type = CallableData::Type::kMethod;
  fn->name = name;
  fn->receiver = self;
  return Value::Callable(std::move(fn));
}

std::string ObjectName(const Value& v) {
  return absl::StrCat("'", v.TypeName(), " object'");
}

// The length of a list or tuple, or of a string in code points (their byte
// offsets, and the end, in *offsets).
int64_t IndexedLength(const Value& obj, std::vector<size_t>* offsets) {
  if (!obj.is_string()) return static_cast<int64_t>(obj.items().size());
  *offsets = CodePointOffsets(obj.text());
  return static_cast<int64_t>(offsets->size()) - 1;
}

absl::StatusOr<int64_t> SliceIndex(const Value& v) {
  if (v.is_integral()) return v.int_value();
  return Invalid(
      "slice indices must be integers or None or have an __index__ method");
}

}  // namespace

absl::StatusOr<Value> Renderer::GetAttr(const Value& obj,
                                        const std::string& name) {
  using Kind = Value::Kind;
  const auto missing = [&] {
    return Value::Undefined(
        absl::StrCat(ObjectName(obj), " has no attribute '", name, "'"));
  };
  switch (obj.kind()) {
    case Kind::kUndefined:
      return UndefinedError(obj);
    case Kind::kDict: {
      if (In(kDictMethods, name)) return Method(obj, name);
      if (In(kUnsafeDictMethods, name)) {
        // The sandbox's answer: an undefined value that fails when used.
        return Value::Undefined(absl::StrCat("access to attribute '", name,
                                             "' of 'dict' object is unsafe."));
      }
      if (const Value* v = obj.dict().Find(Value::String(name))) return *v;
      return missing();
    }
    case Kind::kString:
      if (In(kStrMethods, name)) return Method(obj, name);
      return missing();
    case Kind::kList:
      if (In(kListMethods, name)) return Method(obj, name);
      if (In(kUnsafeListMethods, name)) {
        // The sandbox's answer: an undefined value that fails when used.
        return Value::Undefined(absl::StrCat("access to attribute '", name,
                                             "' of 'list' object is unsafe."));
      }
      return missing();
    case Kind::kTuple:
      if (In(kTupleMethods, name)) return Method(obj, name);
      return missing();
    case Kind::kNamespace: {
      if (const Value* v = obj.ns().Find(name)) return *v;
      if (obj.ns().loop && (name == "cycle" || name == "changed")) {
        return Method(obj, name);
      }
      return missing();
    }
    default:
      return missing();
  }
}

absl::StatusOr<Value> Renderer::GetItem(const Value& obj, const Value& key) {
  using Kind = Value::Kind;
  switch (obj.kind()) {
    case Kind::kUndefined:
      return UndefinedError(obj);
    case Kind::kDict:
      if (const Value* v = obj.dict().Find(key)) return *v;
      break;
    case Kind::kList:
    case Kind::kTuple:
    case Kind::kString: {
      if (!key.is_integral()) break;
      const bool is_string = obj.is_string();
      std::vector<size_t> offsets;
      const int64_t n = IndexedLength(obj, &offsets);
      int64_t i = key.int_value();
      if (i < 0) i += n;
      if (i < 0 || i >= n) {
        return Value::Undefined(
            absl::StrCat(ObjectName(obj), " has no element ", key.int_value()));
      }
      if (!is_string) return obj.items()[static_cast<size_t>(i)];
      return Value::String(Substr(obj.str(), offsets[i], offsets[i + 1]));
    }
    default:
      break;
  }
  if (key.is_string()) return GetAttr(obj, key.text());
  if (key.is_integral() && !obj.is_dict()) {
    return Value::Undefined(
        absl::StrCat(ObjectName(obj), " has no element ", ReprOf(key)));
  }
  return Value::Undefined(
      absl::StrCat(ObjectName(obj), " has no attribute ", ReprOf(key)));
}

absl::StatusOr<Value> Renderer::GetPath(const Value& obj,
                                        const Value& attribute) {
  if (!attribute.is_string()) return GetItem(obj, attribute);
  Value v = obj;
  std::string_view path = attribute.text();
  while (true) {
    const size_t dot = path.find('.');
    const std::string_view part = path.substr(0, dot);
    Value key = Value::String(std::string(part));
    if (!part.empty() &&
        std::all_of(part.begin(), part.end(), absl::ascii_isdigit) &&
        part.size() < 18) {
      int64_t index = 0;
      for (char c : part) index = index * 10 + (c - '0');
      key = Value::Int(index);
    }
    ASSIGN_OR_RETURN(v, GetItem(v, key));
    if (dot == std::string_view::npos) return v;
    path = path.substr(dot + 1);
  }
}

absl::StatusOr<Value> Renderer::Slice(const Value& obj, const Value& start_v,
                                      const Value& stop_v,
                                      const Value& step_v) {
  if (obj.is_undefined()) return UndefinedError(obj);
  if (!obj.is_sequence() && !obj.is_string()) {
    return Value::Undefined(absl::StrCat(ObjectName(obj), " cannot be sliced"));
  }
  const bool is_string = obj.is_string();
  std::vector<size_t> offsets;
  const int64_t n = IndexedLength(obj, &offsets);
  const auto given = [](const Value& v) {
    return !v.is_undefined() && !v.is_none();
  };
  int64_t step = 1;
  if (given(step_v)) {
    ASSIGN_OR_RETURN(step, SliceIndex(step_v));
    if (step == 0) return Invalid("slice step cannot be zero");
    if (step == std::numeric_limits<int64_t>::min()) step = -n - 1;
  }
  const auto adjust = [&](const Value& v,
                          int64_t fallback) -> absl::StatusOr<int64_t> {
    if (!given(v)) return fallback;
    ASSIGN_OR_RETURN(int64_t i, SliceIndex(v));
    if (i < 0) {
      i = i < -n ? -1 : i + n;
      if (i < 0) i = step < 0 ? -1 : 0;
    } else if (i >= n) {
      i = step < 0 ? n - 1 : n;
    }
    return i;
  };
  ASSIGN_OR_RETURN(int64_t start, adjust(start_v, step < 0 ? n - 1 : 0));
  ASSIGN_OR_RETURN(int64_t stop, adjust(stop_v, step < 0 ? -1 : n));
  std::vector<int64_t> picked;
  for (int64_t i = start; step > 0 ? i < stop : i > stop; i += step) {
    picked.push_back(i);
    if (step > 0 ? i > stop - step : i < stop - step) break;
  }
  RETURN_IF_ERROR(Step(static_cast<int64_t>(picked.size())));
  if (!is_string) {
    std::vector<Value> items;
    for (int64_t i : picked) items.push_back(obj.items()[i]);
    if (obj.kind() == Value::Kind::kTuple)
      return Value::Tuple(std::move(items));
    return MakeList(std::move(items));
  }
  if (step == 1) {
    if (picked.empty()) return Value::String(std::string());
    return MakeString(
        Substr(obj.str(), offsets[picked.front()], offsets[picked.back() + 1]));
  }
  std::string text;
  for (int64_t i : picked) {
    text.append(obj.text(), offsets[i], offsets[i + 1] - offsets[i]);
  }
  return MakeString(WithTaint(std::move(text), obj.str().any_untrusted()));
}

absl::StatusOr<std::vector<Value>> Renderer::Iterate(const Value& v) {
  switch (v.kind()) {
    case Value::Kind::kUndefined:
      return std::vector<Value>();
    case Value::Kind::kList:
    case Value::Kind::kTuple:
      RETURN_IF_ERROR(Step(static_cast<int64_t>(v.items().size())));
      return v.items();
    case Value::Kind::kDict: {
      RETURN_IF_ERROR(Step(static_cast<int64_t>(v.dict().items.size())));
      std::vector<Value> keys;
      for (const auto& [k, item] : v.dict().items) keys.push_back(k);
      return keys;
    }
    case Value::Kind::kString: {
      const std::vector<size_t> offsets = CodePointOffsets(v.text());
      RETURN_IF_ERROR(Step(static_cast<int64_t>(offsets.size())));
      std::vector<Value> chars;
      for (size_t i = 0; i + 1 < offsets.size(); ++i) {
        chars.push_back(
            Value::String(Substr(v.str(), offsets[i], offsets[i + 1])));
      }
      return chars;
    }
    default:
      return Invalid(
          absl::StrCat("'", v.TypeName(), "' object is not iterable"));
  }
}

}  // namespace seqboat::jinja
