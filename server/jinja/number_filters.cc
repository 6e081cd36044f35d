// Jinja's filters of numbers: int, float, abs and round, with Python's
// conversions and rounding.
#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <limits>

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "server/jinja/builtins.h"
#include "server/jinja/text_ops.h"

namespace seqboat::jinja {
namespace {

absl::StatusOr<Value> Int(Renderer& /*r*/, BuiltinCall call) {
  ASSIGN_OR_RETURN(auto a, BindFilter(call, {{"value"},
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

absl::StatusOr<Value> Float(Renderer& /*r*/, BuiltinCall call) {
  ASSIGN_OR_RETURN(
      auto a, BindFilter(call, {{"value"}, {"default", Value::Float(0.0)}}));
  const Value& v = a[0];
  if (v.is_number()) return Value::Float(v.number());
  double d = 0;
  if (v.is_string() && ParseFloat(v.text(), &d)) return Value::Float(d);
  return a[1];
}

absl::StatusOr<Value> Abs(Renderer& /*r*/, BuiltinCall call) {
  ASSIGN_OR_RETURN(auto a, BindFilter(call, {{"x"}}));
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

absl::StatusOr<Value> Round(Renderer& /*r*/, BuiltinCall call) {
  ASSIGN_OR_RETURN(auto a,
                   BindFilter(call, {{"value"},
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

constexpr Builtin<BuiltinFn> kNumberFilters[] = {
    {"abs", Abs},
    {"float", Float},
    {"int", Int},
    {"round", Round},
};

}  // namespace

absl::Span<const Builtin<BuiltinFn>> NumberFilters() { return kNumberFilters; }

}  // namespace seqboat::jinja
