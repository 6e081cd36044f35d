// The dict, list and tuple methods the sandbox allows (none that change a
// value), and the `loop` object's cycle().
#include <utility>

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "server/jinja/builtins.h"

namespace seqboat::jinja {
namespace {

absl::StatusOr<Value> DictGet(Renderer& /*r*/, BuiltinCall call) {
  ASSIGN_OR_RETURN(auto a, BindCall(call, MethodName(call),
                                    {{"key"}, {"default", Value::None()}}));
  if (const Value* v = call.self.dict().Find(a[0])) return *v;
  return a[1];
}

// keys(), values(), items() and copy(): no arguments, a step per item.
absl::Status NoArguments(Renderer& r, const BuiltinCall& call) {
  if (!call.args.empty() || !call.kwargs.empty()) {
    return Invalid(absl::StrCat(MethodName(call), "() takes no arguments"));
  }
  return r.Step(static_cast<int64_t>(call.self.dict().items.size()));
}

absl::StatusOr<Value> DictCopy(Renderer& r, BuiltinCall call) {
  RETURN_IF_ERROR(NoArguments(r, call));
  return call.self;
}

absl::StatusOr<Value> DictKeys(Renderer& r, BuiltinCall call) {
  RETURN_IF_ERROR(NoArguments(r, call));
  std::vector<Value> out;
  for (const auto& [k, v] : call.self.dict().items) out.push_back(k);
  return r.MakeList(std::move(out));
}

absl::StatusOr<Value> DictValues(Renderer& r, BuiltinCall call) {
  RETURN_IF_ERROR(NoArguments(r, call));
  std::vector<Value> out;
  for (const auto& [k, v] : call.self.dict().items) out.push_back(v);
  return r.MakeList(std::move(out));
}

absl::StatusOr<Value> DictItems(Renderer& r, BuiltinCall call) {
  RETURN_IF_ERROR(NoArguments(r, call));
  std::vector<Value> out;
  for (const auto& [k, v] : call.self.dict().items) {
    ASSIGN_OR_RETURN(Value pair, Value::Tuple({k, v}));
    out.push_back(std::move(pair));
  }
  return r.MakeList(std::move(out));
}

// Values are immutable, so a copy is the value itself.
absl::StatusOr<Value> SequenceCopy(Renderer& /*r*/, BuiltinCall call) {
  return call.self;
}

// count() and index(): the items equal to the argument.
absl::StatusOr<Value> CountOrIndex(Renderer& r, BuiltinCall call) {
  ASSIGN_OR_RETURN(auto a, BindCall(call, MethodName(call), {{"value"}}));
  const std::vector<Value>& items = call.self.items();
  RETURN_IF_ERROR(r.Step(static_cast<int64_t>(items.size())));
  const bool index = call.name == "index";
  int64_t count = 0;
  for (size_t i = 0; i < items.size(); ++i) {
    if (!Equal(items[i], a[0])) continue;
    if (index) return Value::Int(static_cast<int64_t>(i));
    ++count;
  }
  if (index) return Invalid(absl::StrCat(ReprOf(a[0]), " is not in list"));
  return Value::Int(count);
}

// loop.cycle(a, b, ...): the argument at the loop's index, round.
absl::StatusOr<Value> Cycle(Renderer& /*r*/, BuiltinCall call) {
  if (call.args.empty()) return Invalid("no items for cycling given");
  const Value* index0 = call.self.ns().Find("index0");
  const int64_t i = index0 != nullptr ? index0->int_value() : 0;
  return call
      .args[static_cast<size_t>(i % static_cast<int64_t>(call.args.size()))];
}

constexpr Builtin<BuiltinFn> kDictMethods[] = {
    {"copy", DictCopy}, {"get", DictGet},       {"items", DictItems},
    {"keys", DictKeys}, {"values", DictValues},
};

constexpr Builtin<BuiltinFn> kSequenceMethods[] = {
    {"copy", SequenceCopy},
    {"count", CountOrIndex},
    {"index", CountOrIndex},
};

constexpr Builtin<BuiltinFn> kLoopMethods[] = {{"cycle", Cycle}};

}  // namespace

absl::Span<const Builtin<BuiltinFn>> DictMethods() { return kDictMethods; }

absl::Span<const Builtin<BuiltinFn>> SequenceMethods() {
  return kSequenceMethods;
}

absl::Span<const Builtin<BuiltinFn>> LoopMethods() { return kLoopMethods; }

}  // namespace seqboat::jinja
