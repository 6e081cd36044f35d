// Jinja's tests (`x is defined`, `x is divisibleby 3`, `x is eq y`...):
// each a truth about its subject, and for some about one other value.
#include <string>
#include <string_view>
#include <utility>

#include "base/status_macros.h"
#include "server/jinja/builtins.h"

namespace seqboat::jinja {
namespace {

using Kind = Value::Kind;

// The one argument of a test that takes one.
absl::StatusOr<Value> Other(BuiltinCall& call) {
  ASSIGN_OR_RETURN(auto a, BindCall(call, call.name, {{"other"}}));
  return a[0];
}

absl::StatusOr<bool> Defined(Renderer&, BuiltinCall call) {
  return !call.self.is_undefined();
}
absl::StatusOr<bool> Undefined(Renderer&, BuiltinCall call) {
  return call.self.is_undefined();
}
absl::StatusOr<bool> None(Renderer&, BuiltinCall call) {
  return call.self.is_none();
}
absl::StatusOr<bool> Boolean(Renderer&, BuiltinCall call) {
  return call.self.kind() == Kind::kBool;
}
absl::StatusOr<bool> False(Renderer&, BuiltinCall call) {
  return call.self.kind() == Kind::kBool && !call.self.bool_value();
}
absl::StatusOr<bool> True(Renderer&, BuiltinCall call) {
  return call.self.kind() == Kind::kBool && call.self.bool_value();
}
absl::StatusOr<bool> Integer(Renderer&, BuiltinCall call) {
  return call.self.kind() == Kind::kInt;
}
absl::StatusOr<bool> Float(Renderer&, BuiltinCall call) {
  return call.self.kind() == Kind::kFloat;
}
absl::StatusOr<bool> Number(Renderer&, BuiltinCall call) {
  return call.self.is_number();
}
absl::StatusOr<bool> String(Renderer&, BuiltinCall call) {
  return call.self.is_string();
}
absl::StatusOr<bool> Mapping(Renderer&, BuiltinCall call) {
  return call.self.is_dict();
}

absl::StatusOr<bool> Iterable(Renderer&, BuiltinCall call) {
  const Value& v = call.self;
  return v.is_string() || v.is_sequence() || v.is_dict() || v.is_undefined() ||
         (v.is_namespace() && v.ns().loop);
}

absl::StatusOr<bool> Sequence(Renderer&, BuiltinCall call) {
  const Value& v = call.self;
  return v.is_string() || v.is_sequence() || v.is_dict() || v.is_undefined();
}

absl::StatusOr<bool> Callable(Renderer&, BuiltinCall call) {
  return call.self.is_callable() || call.self.is_undefined();
}

// Nothing is marked safe here.
absl::StatusOr<bool> Escaped(Renderer&, BuiltinCall) { return false; }

// `x is filter` and `x is test`: whether x names one.
absl::StatusOr<bool> IsFilterName(Renderer&, BuiltinCall call) {
  return call.self.is_string() && Renderer::HasFilter(call.self.text());
}
absl::StatusOr<bool> IsTestName(Renderer&, BuiltinCall call) {
  return call.self.is_string() && Renderer::HasTest(call.self.text());
}

// lower and upper: cased, and no letter of the other case.
absl::StatusOr<bool> Cased(const Value& v, bool (*other_case)(uint32_t)) {
  bool cased = false;
  for (uint32_t c : CodePoints(StrOf(v).text)) {
    if (other_case(c)) return false;
    cased = cased || IsCased(c);
  }
  return cased;
}
absl::StatusOr<bool> LowerTest(Renderer&, BuiltinCall call) {
  return Cased(call.self, IsUpperCase);
}
absl::StatusOr<bool> UpperTest(Renderer&, BuiltinCall call) {
  return Cased(call.self, IsLowerCase);
}

// Python's v % divisor == remainder.
absl::StatusOr<bool> Remainder(Renderer& r, const Value& v,
                               const Value& divisor, int64_t remainder) {
  ASSIGN_OR_RETURN(Value rest, r.Binary("%", v, divisor));
  return Equal(rest, Value::Int(remainder));
}
absl::StatusOr<bool> Odd(Renderer& r, BuiltinCall call) {
  return Remainder(r, call.self, Value::Int(2), 1);
}
absl::StatusOr<bool> Even(Renderer& r, BuiltinCall call) {
  return Remainder(r, call.self, Value::Int(2), 0);
}
absl::StatusOr<bool> DivisibleBy(Renderer& r, BuiltinCall call) {
  ASSIGN_OR_RETURN(Value num, Other(call));
  return Remainder(r, call.self, num, 0);
}

absl::StatusOr<bool> SameAs(Renderer&, BuiltinCall call) {
  ASSIGN_OR_RETURN(Value other, Other(call));
  return call.self.SameAs(other);
}

absl::StatusOr<bool> In(Renderer& r, BuiltinCall call) {
  ASSIGN_OR_RETURN(Value seq, Other(call));
  return r.CompareOp("in", call.self, seq);
}

// The comparison tests, each under its names, and their operators.
constexpr std::pair<std::string_view, std::string_view> kComparisons[] = {
    {"eq", "=="}, {"equalto", "=="}, {"==", "=="},      {"ne", "!="},
    {"!=", "!="}, {"lt", "<"},       {"lessthan", "<"}, {"<", "<"},
    {"le", "<="}, {"<=", "<="},      {"gt", ">"},       {"greaterthan", ">"},
    {">", ">"},   {"ge", ">="},      {">=", ">="}};

absl::StatusOr<bool> Compare(Renderer& r, BuiltinCall call) {
  std::string_view op;
  for (const auto& [test, test_op] : kComparisons) {
    if (call.name == test) op = test_op;
  }
  ASSIGN_OR_RETURN(Value other, Other(call));
  return r.CompareOp(std::string(op), call.self, other);
}

constexpr Builtin<TestFn> kTests[] = {
    {"boolean", Boolean},
    {"callable", Callable},
    {"defined", Defined},
    {"divisibleby", DivisibleBy},
    {"eq", Compare},
    {"equalto", Compare},
    {"escaped", Escaped},
    {"even", Even},
    {"false", False},
    {"filter", IsFilterName},
    {"float", Float},
    {"ge", Compare},
    {"gt", Compare},
    {"greaterthan", Compare},
    {"in", In},
    {"integer", Integer},
    {"iterable", Iterable},
    {"le", Compare},
    {"lessthan", Compare},
    {"lower", LowerTest},
    {"lt", Compare},
    {"mapping", Mapping},
    {"ne", Compare},
    {"none", None},
    {"number", Number},
    {"odd", Odd},
    {"sameas", SameAs},
    {"sequence", Sequence},
    {"string", String},
    {"test", IsTestName},
    {"true", True},
    {"undefined", Undefined},
    {"upper", UpperTest},
    {"==", Compare},
    {"!=", Compare},
    {"<", Compare},
    {"<=", Compare},
    {">", Compare},
    {">=", Compare},
};

}  // namespace

absl::Span<const Builtin<TestFn>> Tests() { return kTests; }

}  // namespace seqboat::jinja
