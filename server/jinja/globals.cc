// The global functions templates call: Jinja's range, namespace and dict,
// and transformers' raise_exception and strftime_now.
#include <cmath>
#include <ctime>
#include <memory>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "base/status_macros.h"
#include "server/jinja/builtins.h"

namespace seqboat::jinja {
namespace {

// Jinja's MAX_RANGE: the sandbox's bound on range().
constexpr int64_t kMaxRange = 100000;

// ABORTED with the template's own message, which Render passes on as is.
absl::StatusOr<Value> RaiseException(Renderer& /*r*/, BuiltinCall call) {
  ASSIGN_OR_RETURN(auto a, BindCall(call, call.name, {{"message"}}));
  return absl::AbortedError(StrOf(a[0]).text);
}

// range's start, stop and step from its one to three integers.
absl::Status RangeBounds(const Args& args, int64_t bounds[3]) {
  if (args.empty() || args.size() > 3) {
    return Invalid(
        absl::StrCat("range expected 1 to 3 arguments, got ", args.size()));
  }
  for (const Value& arg : args) {
    if (!arg.is_integral()) {
      return Invalid(absl::StrCat("'", arg.TypeName(),
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
  if (bounds[2] == 0) return Invalid("range() arg 3 must not be zero");
  return absl::OkStatus();
}

absl::StatusOr<Value> Range(Renderer& r, BuiltinCall call) {
  if (!call.kwargs.empty()) {
    return Invalid("range() takes no keyword arguments");
  }
  int64_t bounds[3] = {0, 0, 1};
  RETURN_IF_ERROR(RangeBounds(call.args, bounds));
  const auto [start, stop, step] = bounds;
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
  RETURN_IF_ERROR(r.Step(static_cast<int64_t>(items.size())));
  return r.MakeList(std::move(items));
}

// What dict() and namespace() are given: a mapping or pairs, then keyword
// arguments.
absl::StatusOr<std::vector<std::pair<Value, Value>>> DictItems(
    Renderer& r, BuiltinCall& call) {
  if (call.args.size() > 1) {
    return Invalid(absl::StrCat(call.name,
                                "() takes at most one positional "
                                "argument"));
  }
  std::vector<std::pair<Value, Value>> items;
  if (!call.args.empty()) {
    if (call.args[0].is_dict()) {
      items = call.args[0].dict().items;
    } else {
      ASSIGN_OR_RETURN(std::vector<Value> pairs, r.Iterate(call.args[0]));
      for (const Value& pair : pairs) {
        ASSIGN_OR_RETURN(std::vector<Value> kv, r.Iterate(pair));
        if (kv.size() != 2) {
          return Invalid(absl::StrCat(call.name, "() needs pairs, got one of ",
                                      kv.size(), " items"));
        }
        items.emplace_back(kv[0], kv[1]);
      }
    }
  }
  for (auto& [k, v] : call.kwargs) items.emplace_back(Value::String(k), v);
  return items;
}

absl::StatusOr<Value> Dict(Renderer& r, BuiltinCall call) {
  ASSIGN_OR_RETURN(auto items, DictItems(r, call));
  return Value::Dict(std::move(items));
}

absl::StatusOr<Value> Namespace(Renderer& r, BuiltinCall call) {
  ASSIGN_OR_RETURN(auto items, DictItems(r, call));
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

// The render's time in the local time zone.
absl::StatusOr<Value> StrftimeNow(Renderer& r, BuiltinCall call) {
  ASSIGN_OR_RETURN(auto a, BindCall(call, call.name, {{"format"}}));
  if (!a[0].is_string()) return Invalid("strftime_now needs a format string");
  if (a[0].text().size() > 256) {
    return Invalid("strftime_now's format is over 256 bytes");
  }
  const std::time_t t = absl::ToTimeT(r.now());
  std::tm tm{};
  localtime_r(&t, &tm);
  char buf[2048];
  const size_t n = std::strftime(buf, sizeof(buf), a[0].text().c_str(), &tm);
  return r.MakeString(Trusted(std::string(buf, n)));
}

constexpr Builtin<BuiltinFn> kGlobals[] = {
    {"dict", Dict},
    {"namespace", Namespace},
    {"raise_exception", RaiseException},
    {"range", Range},
    {"strftime_now", StrftimeNow},
};

}  // namespace

absl::Span<const Builtin<BuiltinFn>> Globals() { return kGlobals; }

}  // namespace seqboat::jinja
