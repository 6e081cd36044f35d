#include "server/jinja/value.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace seqboat::jinja {
namespace {

absl::Status TooDeep() {
  return absl::InvalidArgumentError(absl::StrCat(
      "a list or dict nests more than ", kMaxValueDepth, " levels"));
}

int MaxDepth(const std::vector<Value>& items) {
  int depth = 0;
  for (const Value& v : items) depth = std::max(depth, v.depth());
  return depth;
}

}  // namespace

Value Value::Undefined(std::string hint) {
  Value v;
  v.data_ = std::make_shared<const std::string>(std::move(hint));
  return v;
}

Value Value::None() {
  Value v;
  v.kind_ = Kind::kNone;
  return v;
}

Value Value::Bool(bool b) {
  Value v;
  v.kind_ = Kind::kBool;
  v.data_ = b;
  return v;
}

Value Value::Int(int64_t i) {
  Value v;
  v.kind_ = Kind::kInt;
  v.data_ = i;
  return v;
}

Value Value::Float(double d) {
  Value v;
  v.kind_ = Kind::kFloat;
  v.data_ = d;
  return v;
}

Value Value::String(Str s) {
  Value v;
  v.kind_ = Kind::kString;
  v.data_ = std::make_shared<const Str>(std::move(s));
  return v;
}

Value Value::String(std::string s) { return String(Trusted(std::move(s))); }

absl::StatusOr<Value> Value::List(std::vector<Value> items) {
  const int depth = 1 + MaxDepth(items);
  if (depth > kMaxValueDepth) return TooDeep();
  auto data = std::make_shared<ListData>();
  data->items = std::move(items);
  data->depth = depth;
  Value v;
  v.kind_ = Kind::kList;
  v.data_ = std::shared_ptr<const ListData>(std::move(data));
  return v;
}

absl::StatusOr<Value> Value::Tuple(std::vector<Value> items) {
  absl::StatusOr<Value> v = List(std::move(items));
  if (v.ok()) v->kind_ = Kind::kTuple;
  return v;
}

absl::StatusOr<Value> Value::Dict(std::vector<std::pair<Value, Value>> items) {
  auto data = std::make_shared<DictData>();
  int depth = 0;
  for (auto& [key, value] : items) {
    depth = std::max({depth, key.depth(), value.depth()});
    bool replaced = false;
    for (auto& [k, v] : data->items) {
      if (Equal(k, key)) {
        v = std::move(value);
        replaced = true;
        break;
      }
    }
    if (!replaced) data->items.emplace_back(std::move(key), std::move(value));
  }
  if (depth + 1 > kMaxValueDepth) return TooDeep();
  data->depth = depth + 1;
  Value v;
  v.kind_ = Kind::kDict;
  v.data_ = std::shared_ptr<const DictData>(std::move(data));
  return v;
}

Value Value::Namespace(std::shared_ptr<NamespaceData> ns) {
  Value v;
  v.kind_ = Kind::kNamespace;
  v.data_ = std::move(ns);
  return v;
}

Value Value::Callable(std::shared_ptr<const CallableData> fn) {
  Value v;
  v.kind_ = Kind::kCallable;
  v.data_ = std::move(fn);
  return v;
}

int64_t Value::int_value() const {
  if (kind_ == Kind::kBool) return std::get<bool>(data_) ? 1 : 0;
  return std::get<int64_t>(data_);
}

double Value::number() const {
  if (kind_ == Kind::kFloat) return std::get<double>(data_);
  return static_cast<double>(int_value());
}

const std::vector<Value>& Value::items() const {
  return std::get<std::shared_ptr<const ListData>>(data_)->items;
}

const std::string& Value::undefined_hint() const {
  static const std::string* const empty = new std::string();
  if (auto* hint = std::get_if<std::shared_ptr<const std::string>>(&data_)) {
    return **hint;
  }
  return *empty;
}

bool Value::SameAs(const Value& other) const {
  if (kind_ != other.kind_) return false;
  switch (kind_) {
    case Kind::kUndefined:
    case Kind::kNone:
      return true;
    case Kind::kBool:
    case Kind::kInt:
    case Kind::kFloat:
      return Equal(*this, other);
    case Kind::kString:
      return std::get<std::shared_ptr<const Str>>(data_) ==
             std::get<std::shared_ptr<const Str>>(other.data_);
    case Kind::kList:
    case Kind::kTuple:
      return std::get<std::shared_ptr<const ListData>>(data_) ==
             std::get<std::shared_ptr<const ListData>>(other.data_);
    case Kind::kDict:
      return &dict() == &other.dict();
    case Kind::kNamespace:
      return &ns() == &other.ns();
    case Kind::kCallable:
      return &callable() == &other.callable();
  }
  return false;
}

int Value::depth() const {
  switch (kind_) {
    case Kind::kList:
    case Kind::kTuple:
      return std::get<std::shared_ptr<const ListData>>(data_)->depth;
    case Kind::kDict:
      return dict().depth;
    case Kind::kNamespace: {
      int depth = 0;
      for (const auto& [name, value] : ns().attrs) {
        depth = std::max(depth, value.depth());
      }
      return depth + 1;
    }
    case Kind::kCallable:
      return callable().type == CallableData::Type::kMethod
                 ? callable().receiver.depth() + 1
                 : 1;
    default:
      return 0;
  }
}

std::string Value::TypeName() const {
  switch (kind_) {
    case Kind::kUndefined:
      return "Undefined";
    case Kind::kNone:
      return "NoneType";
    case Kind::kBool:
      return "bool";
    case Kind::kInt:
      return "int";
    case Kind::kFloat:
      return "float";
    case Kind::kString:
      return "str";
    case Kind::kList:
      return "list";
    case Kind::kTuple:
      return "tuple";
    case Kind::kDict:
      return "dict";
    case Kind::kNamespace:
      return ns().loop ? "LoopContext" : "Namespace";
    case Kind::kCallable:
      switch (callable().type) {
        case CallableData::Type::kGlobal:
          return "function";
        case CallableData::Type::kMethod:
          return "builtin_function_or_method";
        case CallableData::Type::kMacro:
          return "Macro";
      }
  }
  return "object";
}

bool Value::Truthy() const {
  switch (kind_) {
    case Kind::kUndefined:
    case Kind::kNone:
      return false;
    case Kind::kBool:
      return bool_value();
    case Kind::kInt:
      return int_value() != 0;
    case Kind::kFloat:
      return number() != 0.0;
    case Kind::kString:
      return !text().empty();
    case Kind::kList:
    case Kind::kTuple:
      return !items().empty();
    case Kind::kDict:
      return !dict().items.empty();
    case Kind::kNamespace:
    case Kind::kCallable:
      return true;
  }
  return false;
}

const Value* DictData::Find(const Value& key) const {
  for (const auto& [k, v] : items) {
    if (Equal(k, key)) return &v;
  }
  return nullptr;
}

const Value* NamespaceData::Find(const std::string& name) const {
  for (const auto& [k, v] : attrs) {
    if (k == name) return &v;
  }
  return nullptr;
}

void NamespaceData::Set(const std::string& name, Value value) {
  for (auto& [k, v] : attrs) {
    if (k == name) {
      v = std::move(value);
      return;
    }
  }
  attrs.emplace_back(name, std::move(value));
}

bool Equal(const Value& a, const Value& b) {
  using Kind = Value::Kind;
  if (a.is_number() && b.is_number()) {
    if (a.is_integral() && b.is_integral()) {
      return a.int_value() == b.int_value();
    }
    return a.number() == b.number();
  }
  if (a.kind() != b.kind()) return false;
  switch (a.kind()) {
    case Kind::kUndefined:
    case Kind::kNone:
      return true;
    case Kind::kString:
      return a.text() == b.text();
    case Kind::kList:
    case Kind::kTuple: {
      const auto& x = a.items();
      const auto& y = b.items();
      if (x.size() != y.size()) return false;
      for (size_t i = 0; i < x.size(); ++i) {
        if (!Equal(x[i], y[i])) return false;
      }
      return true;
    }
    case Kind::kDict: {
      const auto& x = a.dict().items;
      if (x.size() != b.dict().items.size()) return false;
      for (const auto& [k, v] : x) {
        const Value* other = b.dict().Find(k);
        if (other == nullptr || !Equal(v, *other)) return false;
      }
      return true;
    }
    default:
      return a.SameAs(b);
  }
}

absl::StatusOr<bool> Less(const Value& a, const Value& b, const char* op) {
  if (a.is_number() && b.is_number()) {
    if (a.is_integral() && b.is_integral()) {
      return a.int_value() < b.int_value();
    }
    return a.number() < b.number();
  }
  if (a.is_string() && b.is_string()) return a.text() < b.text();
  if (a.kind() == b.kind() && a.is_sequence()) {
    const auto& x = a.items();
    const auto& y = b.items();
    for (size_t i = 0; i < x.size() && i < y.size(); ++i) {
      if (!Equal(x[i], y[i])) return Less(x[i], y[i], op);
    }
    return x.size() < y.size();
  }
  return absl::InvalidArgumentError(
      absl::StrCat("'", op, "' not supported between instances of '",
                   a.TypeName(), "' and '", b.TypeName(), "'"));
}

bool AnyUntrusted(const Value& v) {
  switch (v.kind()) {
    case Value::Kind::kString:
      return v.str().any_untrusted();
    case Value::Kind::kList:
    case Value::Kind::kTuple:
      for (const Value& item : v.items()) {
        if (AnyUntrusted(item)) return true;
      }
      return false;
    case Value::Kind::kDict:
      for (const auto& [k, item] : v.dict().items) {
        if (AnyUntrusted(k) || AnyUntrusted(item)) return true;
      }
      return false;
    case Value::Kind::kNamespace:
      for (const auto& [k, item] : v.ns().attrs) {
        if (AnyUntrusted(item)) return true;
      }
      return false;
    case Value::Kind::kCallable:
      return AnyUntrusted(v.callable().receiver);
    default:
      return false;
  }
}

bool ContainsNamespace(const Value& v) {
  switch (v.kind()) {
    case Value::Kind::kNamespace:
      return true;
    case Value::Kind::kList:
    case Value::Kind::kTuple:
      for (const Value& item : v.items()) {
        if (ContainsNamespace(item)) return true;
      }
      return false;
    case Value::Kind::kDict:
      for (const auto& [k, item] : v.dict().items) {
        if (ContainsNamespace(k) || ContainsNamespace(item)) return true;
      }
      return false;
    case Value::Kind::kCallable:
      return ContainsNamespace(v.callable().receiver);
    default:
      return false;
  }
}

std::string ReprOf(const Value& v) {
  using Kind = Value::Kind;
  switch (v.kind()) {
    case Kind::kUndefined:
      return "Undefined";
    case Kind::kNone:
      return "None";
    case Kind::kBool:
      return v.bool_value() ? "True" : "False";
    case Kind::kInt:
      return absl::StrCat(v.int_value());
    case Kind::kFloat:
      return FloatRepr(v.number());
    case Kind::kString:
      return Repr(v.text());
    case Kind::kList:
    case Kind::kTuple: {
      const bool tuple = v.kind() == Kind::kTuple;
      std::string out = tuple ? "(" : "[";
      const auto& items = v.items();
      for (size_t i = 0; i < items.size(); ++i) {
        if (i > 0) out += ", ";
        out += ReprOf(items[i]);
      }
      if (tuple && items.size() == 1) out += ",";
      out += tuple ? ")" : "]";
      return out;
    }
    case Kind::kDict: {
      std::string out = "{";
      bool first = true;
      for (const auto& [k, item] : v.dict().items) {
        if (!first) out += ", ";
        first = false;
        absl::StrAppend(&out, ReprOf(k), ": ", ReprOf(item));
      }
      return out + "}";
    }
    case Kind::kNamespace: {
      const NamespaceData& ns = v.ns();
      if (ns.loop) {
        const Value* index = ns.Find("index");
        const Value* length = ns.Find("length");
        return absl::StrCat("<LoopContext ",
                            index != nullptr ? ReprOf(*index) : "?", "/",
                            length != nullptr ? ReprOf(*length) : "?", ">");
      }
      std::string out = "<Namespace {";
      bool first = true;
      for (const auto& [k, item] : ns.attrs) {
        if (!first) out += ", ";
        first = false;
        absl::StrAppend(&out, Repr(k), ": ", ReprOf(item));
      }
      return out + "}>";
    }
    case Kind::kCallable:
      return absl::StrCat("<", v.TypeName(), " ", v.callable().name, ">");
  }
  return "";
}

Str ToStr(const Value& v) {
  switch (v.kind()) {
    case Value::Kind::kString:
      return v.str();
    case Value::Kind::kUndefined:
      return Str();
    default:
      return WithTaint(ReprOf(v), AnyUntrusted(v));
  }
}

namespace {

void JsonString(std::string_view s, bool ensure_ascii, std::string* out) {
  out->push_back('"');
  size_t pos = 0;
  while (pos < s.size()) {
    size_t n = 1;
    const uint32_t c = DecodeAt(s, pos, &n);
    char buf[16];
    switch (c) {
      case '"':
        *out += "\\\"";
        break;
      case '\\':
        *out += "\\\\";
        break;
      case '\n':
        *out += "\\n";
        break;
      case '\r':
        *out += "\\r";
        break;
      case '\t':
        *out += "\\t";
        break;
      case '\b':
        *out += "\\b";
        break;
      case '\f':
        *out += "\\f";
        break;
      default:
        if (c < 0x20 || (ensure_ascii && c >= 0x7F)) {
          if (c >= 0x10000) {
            const uint32_t u = c - 0x10000;
            std::snprintf(buf, sizeof(buf), "\\u%04x\\u%04x",
                          0xD800 + (u >> 10), 0xDC00 + (u & 0x3FF));
          } else {
            std::snprintf(buf, sizeof(buf), "\\u%04x", c);
          }
          *out += buf;
        } else {
          out->append(s.substr(pos, n));
        }
    }
    pos += n;
  }
  out->push_back('"');
}

std::string JsonFloat(double d) {
  if (std::isnan(d)) return "NaN";
  if (std::isinf(d)) return d > 0 ? "Infinity" : "-Infinity";
  return FloatRepr(d);
}

absl::Status NotSerializable(const Value& v) {
  return absl::InvalidArgumentError(absl::StrCat(
      "Object of type ", v.TypeName(), " is not JSON serializable"));
}

absl::Status WriteJson(const Value& v, const JsonOptions& options, int level,
                       std::string* out) {
  using Kind = Value::Kind;
  const auto newline = [&](int at) {
    if (!options.indent.has_value()) return;
    out->push_back('\n');
    for (int i = 0; i < at; ++i) *out += *options.indent;
  };
  const std::string& item_separator = options.item_separator;
  switch (v.kind()) {
    case Kind::kNone:
      *out += "null";
      return absl::OkStatus();
    case Kind::kBool:
      *out += v.bool_value() ? "true" : "false";
      return absl::OkStatus();
    case Kind::kInt:
      absl::StrAppend(out, v.int_value());
      return absl::OkStatus();
    case Kind::kFloat:
      *out += JsonFloat(v.number());
      return absl::OkStatus();
    case Kind::kString:
      JsonString(v.text(), options.ensure_ascii, out);
      return absl::OkStatus();
    case Kind::kList:
    case Kind::kTuple: {
      const auto& items = v.items();
      if (items.empty()) {
        *out += "[]";
        return absl::OkStatus();
      }
      out->push_back('[');
      for (size_t i = 0; i < items.size(); ++i) {
        if (i > 0) *out += item_separator;
        newline(level + 1);
        if (absl::Status s = WriteJson(items[i], options, level + 1, out);
            !s.ok()) {
          return s;
        }
      }
      newline(level);
      out->push_back(']');
      return absl::OkStatus();
    }
    case Kind::kDict: {
      std::vector<const std::pair<Value, Value>*> items;
      for (const auto& item : v.dict().items) items.push_back(&item);
      if (items.empty()) {
        *out += "{}";
        return absl::OkStatus();
      }
      if (options.sort_keys) {
        absl::Status error;
        std::stable_sort(items.begin(), items.end(),
                         [&](const auto* a, const auto* b) {
                           absl::StatusOr<bool> less = Less(a->first, b->first);
                           if (!less.ok()) {
                             error = less.status();
                             return false;
                           }
                           return *less;
                         });
        if (!error.ok()) return error;
      }
      out->push_back('{');
      bool first = true;
      for (const auto* item : items) {
        if (!first) *out += item_separator;
        first = false;
        newline(level + 1);
        const Value& key = item->first;
        switch (key.kind()) {
          case Kind::kString:
            JsonString(key.text(), options.ensure_ascii, out);
            break;
          case Kind::kNone:
            *out += "\"null\"";
            break;
          case Kind::kBool:
            *out += key.bool_value() ? "\"true\"" : "\"false\"";
            break;
          case Kind::kInt:
            absl::StrAppend(out, "\"", key.int_value(), "\"");
            break;
          case Kind::kFloat:
            absl::StrAppend(out, "\"", JsonFloat(key.number()), "\"");
            break;
          default:
            return absl::InvalidArgumentError(
                absl::StrCat("keys must be str, int, float, bool or None, not ",
                             key.TypeName()));
        }
        *out += options.key_separator;
        if (absl::Status s = WriteJson(item->second, options, level + 1, out);
            !s.ok()) {
          return s;
        }
      }
      newline(level);
      out->push_back('}');
      return absl::OkStatus();
    }
    default:
      return NotSerializable(v);
  }
}

}  // namespace

absl::StatusOr<std::string> ToJson(const Value& v, const JsonOptions& options) {
  std::string out;
  if (absl::Status s = WriteJson(v, options, 0, &out); !s.ok()) return s;
  return out;
}

}  // namespace seqboat::jinja
