// Jinja's filters of sequences and mappings: their items counted, picked,
// mapped, selected, sorted and summed.
#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "server/jinja/builtins.h"

namespace seqboat::jinja {
namespace {

// length and count.
absl::StatusOr<Value> Length(Renderer& /*r*/, BuiltinCall call) {
  ASSIGN_OR_RETURN(auto a, BindFilter(call, {{"obj"}}));
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

absl::StatusOr<Value> List(Renderer& r, BuiltinCall call) {
  ASSIGN_OR_RETURN(auto a, BindFilter(call, {{"value"}}));
  ASSIGN_OR_RETURN(std::vector<Value> items, r.Iterate(a[0]));
  return r.MakeList(std::move(items));
}

absl::StatusOr<Value> Items(Renderer& r, BuiltinCall call) {
  ASSIGN_OR_RETURN(auto a, BindFilter(call, {{"value"}}));
  if (a[0].is_undefined()) return r.MakeList({});
  if (!a[0].is_dict()) {
    return Invalid("Can only get item pairs from a mapping.");
  }
  return r.CallMethod(a[0], "items", {}, {});
}

// first and last.
absl::StatusOr<Value> FirstOrLast(Renderer& r, BuiltinCall call) {
  ASSIGN_OR_RETURN(auto a, BindFilter(call, {{"seq"}}));
  ASSIGN_OR_RETURN(std::vector<Value> items, r.Iterate(a[0]));
  if (items.empty()) {
    return Value::Undefined(
        absl::StrCat("No ", call.name, " item, sequence was empty."));
  }
  return call.name == "first" ? items.front() : items.back();
}

absl::StatusOr<Value> Reverse(Renderer& r, BuiltinCall call) {
  ASSIGN_OR_RETURN(auto a, BindFilter(call, {{"value"}}));
  if (a[0].is_string()) {
    const std::vector<size_t> offsets = CodePointOffsets(a[0].text());
    std::string out;
    for (size_t i = offsets.size() - 1; i > 0; --i) {
      out.append(a[0].text(), offsets[i - 1], offsets[i] - offsets[i - 1]);
    }
    return r.MakeString(WithTaint(std::move(out), AnyUntrusted(a[0])));
  }
  ASSIGN_OR_RETURN(std::vector<Value> items, r.Iterate(a[0]));
  std::reverse(items.begin(), items.end());
  return r.MakeList(std::move(items));
}

absl::StatusOr<Value> Attr(Renderer& r, BuiltinCall call) {
  ASSIGN_OR_RETURN(auto a, BindFilter(call, {{"obj"}, {"name"}}));
  if (!a[1].is_string()) return Invalid("attr's name must be a string");
  // getattr only: a dict's keys are not its attributes.
  if (a[0].is_dict()) {
    if (a[1].text() == "get" || a[1].text() == "items" ||
        a[1].text() == "keys" || a[1].text() == "values" ||
        a[1].text() == "copy") {
      return r.GetAttr(a[0], a[1].text());
    }
    return Value::Undefined(
        absl::StrCat("'dict object' has no attribute '", a[1].text(), "'"));
  }
  return r.GetAttr(a[0], a[1].text());
}

// map(attribute=...): each item's attribute, or `default` where it has none.
absl::StatusOr<Value> MapAttribute(Renderer& r, const std::vector<Value>& items,
                                   const Kwargs& kwargs) {
  Value attribute;
  Value fallback;
  for (const auto& [k, v] : kwargs) {
    if (k == "attribute") {
      attribute = v;
    } else if (k == "default") {
      fallback = v;
    } else {
      return Invalid(absl::StrCat("Unexpected keyword argument '", k, "'"));
    }
  }
  std::vector<Value> out;
  for (const Value& item : items) {
    ASSIGN_OR_RETURN(Value v, r.GetPath(item, attribute));
    if (v.is_undefined() && !fallback.is_undefined()) v = fallback;
    out.push_back(std::move(v));
  }
  return r.MakeList(std::move(out));
}

absl::StatusOr<Value> Map(Renderer& r, BuiltinCall call) {
  ASSIGN_OR_RETURN(std::vector<Value> items, r.Iterate(call.self));
  for (const auto& [k, v] : call.kwargs) {
    if (k == "attribute") return MapAttribute(r, items, call.kwargs);
  }
  if (call.args.empty() || !call.args[0].is_string()) {
    return Invalid("map requires a filter argument");
  }
  const std::string filter = call.args[0].text();
  Args rest(call.args.begin() + 1, call.args.end());
  std::vector<Value> out;
  for (const Value& item : items) {
    ASSIGN_OR_RETURN(Value v, r.Filter(filter, item, rest, call.kwargs));
    out.push_back(std::move(v));
  }
  return r.MakeList(std::move(out));
}

// select, reject, selectattr and rejectattr: the items whose test (or
// truth), of the item or of its `attribute`, is `keep_when`.
absl::StatusOr<Value> Select(Renderer& r, BuiltinCall& call, bool by_attribute,
                             bool keep_when) {
  ASSIGN_OR_RETURN(std::vector<Value> items, r.Iterate(call.self));
  const Args& args = call.args;
  Value attribute;
  size_t next = 0;
  if (by_attribute) {
    if (args.empty()) {
      return Invalid(absl::StrCat(call.name, " needs an attribute"));
    }
    attribute = args[0];
    next = 1;
  }
  std::string test;
  if (args.size() > next) {
    if (!args[next].is_string()) {
      return Invalid(absl::StrCat(call.name, "'s test must be a test name"));
    }
    test = args[next].text();
    ++next;
  }
  Args rest(args.begin() + static_cast<std::ptrdiff_t>(next), args.end());
  std::vector<Value> out;
  for (const Value& item : items) {
    Value probe = item;
    if (by_attribute) {
      ASSIGN_OR_RETURN(probe, r.GetPath(item, attribute));
    }
    bool result = probe.Truthy();
    if (!test.empty()) {
      ASSIGN_OR_RETURN(result, r.Test(test, probe, rest, call.kwargs));
    }
    if (result == keep_when) out.push_back(item);
  }
  return r.MakeList(std::move(out));
}

absl::StatusOr<Value> SelectFilter(Renderer& r, BuiltinCall call) {
  return Select(r, call, /*by_attribute=*/false, /*keep_when=*/true);
}

absl::StatusOr<Value> Reject(Renderer& r, BuiltinCall call) {
  return Select(r, call, /*by_attribute=*/false, /*keep_when=*/false);
}

absl::StatusOr<Value> SelectAttr(Renderer& r, BuiltinCall call) {
  return Select(r, call, /*by_attribute=*/true, /*keep_when=*/true);
}

absl::StatusOr<Value> RejectAttr(Renderer& r, BuiltinCall call) {
  return Select(r, call, /*by_attribute=*/true, /*keep_when=*/false);
}

// Python's <, for sorting: the first error is kept, and every comparison
// after it is false.
class Ordering {
 public:
  bool operator()(const Value& x, const Value& y) {
    if (!error_.ok()) return false;
    absl::StatusOr<bool> r = Less(x, y);
    if (!r.ok()) {
      error_ = r.status();
      return false;
    }
    return *r;
  }
  const absl::Status& error() const { return error_; }

 private:
  absl::Status error_;
};

// The items of sort, unique, min and max, each with its key: the item, or
// its `attribute`, lowercased unless `case_sensitive`.
using Keyed = std::vector<std::pair<Value, Value>>;  // key, item

absl::StatusOr<Keyed> KeyedItems(Renderer& r, const Value& value,
                                 bool case_sensitive, const Value& attribute) {
  ASSIGN_OR_RETURN(std::vector<Value> items, r.Iterate(value));
  Keyed keyed;
  for (const Value& item : items) {
    Value key = item;
    if (IsPresent(attribute)) {
      ASSIGN_OR_RETURN(key, r.GetPath(item, attribute));
    }
    if (!case_sensitive && key.is_string()) {
      key = Value::String(Lower(key.text()));
    }
    keyed.emplace_back(std::move(key), item);
  }
  RETURN_IF_ERROR(r.Step(static_cast<int64_t>(keyed.size()) * 8));
  return keyed;
}

// The keyed items of unique, min and max, from their arguments (value,
// case_sensitive, attribute).
absl::StatusOr<Keyed> KeyedArguments(Renderer& r, BuiltinCall& call) {
  ASSIGN_OR_RETURN(auto a,
                   BindFilter(call, {{"value"},
                                     {"case_sensitive", Value::Bool(false)},
                                     {"attribute", Value::None()}}));
  return KeyedItems(r, a[0], a[1].Truthy(), a[2]);
}

absl::StatusOr<Value> Sort(Renderer& r, BuiltinCall call) {
  ASSIGN_OR_RETURN(auto a,
                   BindFilter(call, {{"value"},
                                     {"reverse", Value::Bool(false)},
                                     {"case_sensitive", Value::Bool(false)},
                                     {"attribute", Value::None()}}));
  const bool reverse = a[1].Truthy();
  ASSIGN_OR_RETURN(Keyed keyed, KeyedItems(r, a[0], a[2].Truthy(), a[3]));
  Ordering less;
  std::stable_sort(
      keyed.begin(), keyed.end(), [&](const auto& x, const auto& y) {
        return reverse ? less(y.first, x.first) : less(x.first, y.first);
      });
  if (!less.error().ok()) return less.error();
  std::vector<Value> out;
  for (auto& [key, item] : keyed) out.push_back(std::move(item));
  return r.MakeList(std::move(out));
}

absl::StatusOr<Value> Unique(Renderer& r, BuiltinCall call) {
  ASSIGN_OR_RETURN(Keyed keyed, KeyedArguments(r, call));
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
    RETURN_IF_ERROR(r.Step(static_cast<int64_t>(seen.size())));
    seen.push_back(key);
    out.push_back(item);
  }
  return r.MakeList(std::move(out));
}

// min and max.
absl::StatusOr<Value> MinOrMax(Renderer& r, BuiltinCall call) {
  ASSIGN_OR_RETURN(Keyed keyed, KeyedArguments(r, call));
  if (keyed.empty()) {
    return Value::Undefined("No aggregated item, sequence was empty.");
  }
  const bool min = call.name == "min";
  Ordering less;
  size_t best = 0;
  for (size_t i = 1; i < keyed.size(); ++i) {
    const bool better = min ? less(keyed[i].first, keyed[best].first)
                            : less(keyed[best].first, keyed[i].first);
    if (better) best = i;
  }
  if (!less.error().ok()) return less.error();
  return keyed[best].second;
}

absl::StatusOr<Value> DictSort(Renderer& r, BuiltinCall call) {
  ASSIGN_OR_RETURN(auto a,
                   BindFilter(call, {{"value"},
                                     {"case_sensitive", Value::Bool(false)},
                                     {"by", Value::String("key")},
                                     {"reverse", Value::Bool(false)}}));
  if (!a[0].is_dict()) return Invalid("dictsort needs a dict");
  const bool by_value = a[2].is_string() && a[2].text() == "value";
  if (!by_value && !(a[2].is_string() && a[2].text() == "key")) {
    return Invalid("You can only sort by either \"key\" or \"value\"");
  }
  std::vector<std::pair<Value, Value>> items = a[0].dict().items;
  RETURN_IF_ERROR(r.Step(static_cast<int64_t>(items.size()) * 8));
  const auto key = [&](const std::pair<Value, Value>& item) {
    const Value& k = by_value ? item.second : item.first;
    if (!a[1].Truthy() && k.is_string()) return Value::String(Lower(k.text()));
    return k;
  };
  Ordering less;
  const bool reverse = a[3].Truthy();
  std::stable_sort(
      items.begin(), items.end(), [&](const auto& x, const auto& y) {
        return reverse ? less(key(y), key(x)) : less(key(x), key(y));
      });
  if (!less.error().ok()) return less.error();
  std::vector<Value> out;
  for (auto& [k, v] : items) {
    ASSIGN_OR_RETURN(Value pair, Value::Tuple({k, v}));
    out.push_back(std::move(pair));
  }
  return r.MakeList(std::move(out));
}

absl::StatusOr<Value> Sum(Renderer& r, BuiltinCall call) {
  ASSIGN_OR_RETURN(auto a, BindFilter(call, {{"iterable"},
                                             {"attribute", Value::None()},
                                             {"start", Value::Int(0)}}));
  ASSIGN_OR_RETURN(std::vector<Value> items, r.Iterate(a[0]));
  Value total = a[2];
  for (const Value& item : items) {
    Value v = item;
    if (IsPresent(a[1])) {
      ASSIGN_OR_RETURN(v, r.GetPath(item, a[1]));
    }
    ASSIGN_OR_RETURN(total, r.Binary("+", total, v));
  }
  return total;
}

constexpr Builtin<BuiltinFn> kSequenceFilters[] = {
    {"attr", Attr},
    {"count", Length},
    {"dictsort", DictSort},
    {"first", FirstOrLast},
    {"items", Items},
    {"last", FirstOrLast},
    {"length", Length},
    {"list", List},
    {"map", Map},
    {"max", MinOrMax},
    {"min", MinOrMax},
    {"reject", Reject},
    {"rejectattr", RejectAttr},
    {"reverse", Reverse},
    {"select", SelectFilter},
    {"selectattr", SelectAttr},
    {"sort", Sort},
    {"sum", Sum},
    {"unique", Unique},
};

}  // namespace

absl::Span<const Builtin<BuiltinFn>> SequenceFilters() {
  return kSequenceFilters;
}

}  // namespace seqboat::jinja
