// Python's binary and comparison operators on template values: checked
// 64-bit int arithmetic, float division and modulo as CPython computes
// them, sequence repetition within the budget, and `in`.
#include <algorithm>
#include <cmath>
#include <limits>
#include <string_view>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "server/jinja/renderer.h"

namespace seqboat::jinja {
namespace {

// Python's checked int arithmetic.
absl::Status Overflow() { return Invalid("integer overflow"); }

int64_t FloorDiv(int64_t a, int64_t b) {
  int64_t q = a / b;
  if ((a % b != 0) && ((a < 0) != (b < 0))) --q;
  return q;
}

int64_t FloorMod(int64_t a, int64_t b) {
  int64_t r = a % b;
  if (r != 0 && ((r < 0) != (b < 0))) r += b;
  return r;
}

// CPython's float_divmod.
void FloatDivMod(double vx, double wx, double* floordiv, double* mod) {
  *mod = std::fmod(vx, wx);
  double div = (vx - *mod) / wx;
  if (*mod != 0.0) {
    if ((wx < 0) != (*mod < 0)) {
      *mod += wx;
      div -= 1.0;
    }
  } else {
    *mod = std::copysign(0.0, wx);
  }
  if (div != 0.0) {
    *floordiv = std::floor(div);
    if (div - *floordiv > 0.5) *floordiv += 1.0;
  } else {
    *floordiv = std::copysign(0.0, vx / wx);
  }
}

absl::Status Unsupported(const std::string& op, const Value& a,
                         const Value& b) {
  return Invalid(absl::StrCat("unsupported operand type(s) for ", op, ": '",
                              a.TypeName(), "' and '", b.TypeName(), "'"));
}

bool BothInts(const Value& a, const Value& b) {
  return a.is_integral() && b.is_integral();
}

bool BothNumbers(const Value& a, const Value& b) {
  return a.is_number() && b.is_number();
}

// One binary operator on two defined values.
using OperatorFn = absl::StatusOr<Value> (*)(Renderer& r, const std::string& op,
                                             const Value& a, const Value& b);

absl::StatusOr<Value> Add(Renderer& r, const std::string& op, const Value& a,
                          const Value& b) {
  if (BothInts(a, b)) {
    int64_t sum = 0;
    if (__builtin_add_overflow(a.int_value(), b.int_value(), &sum)) {
      return Overflow();
    }
    return Value::Int(sum);
  }
  if (BothNumbers(a, b)) return Value::Float(a.number() + b.number());
  if (a.is_string() && b.is_string()) {
    RETURN_IF_ERROR(r.Reserve(a.text().size() + b.text().size()));
    Str s = a.str();
    Append(&s, b.str());
    return Value::String(std::move(s));
  }
  if (a.kind() == b.kind() && a.is_sequence()) {
    std::vector<Value> items = a.items();
    items.insert(items.end(), b.items().begin(), b.items().end());
    RETURN_IF_ERROR(r.Step(static_cast<int64_t>(items.size())));
    if (a.kind() == Value::Kind::kTuple) return Value::Tuple(std::move(items));
    return r.MakeList(std::move(items));
  }
  if (a.is_string() || a.kind() == Value::Kind::kList) {
    return Invalid(absl::StrCat("can only concatenate ", a.TypeName(),
                                " (not \"", b.TypeName(), "\") to ",
                                a.TypeName()));
  }
  return Unsupported(op, a, b);
}

absl::StatusOr<Value> Subtract(Renderer& /*r*/, const std::string& op,
                               const Value& a, const Value& b) {
  if (BothInts(a, b)) {
    int64_t difference = 0;
    if (__builtin_sub_overflow(a.int_value(), b.int_value(), &difference)) {
      return Overflow();
    }
    return Value::Int(difference);
  }
  if (BothNumbers(a, b)) return Value::Float(a.number() - b.number());
  return Unsupported(op, a, b);
}

// A string, list or tuple `times` times (none when negative), within the
// longest string and the steps.
absl::StatusOr<Value> Repeat(Renderer& r, const Value& seq, int64_t count) {
  const int64_t times = std::max<int64_t>(0, count);
  const Limits& limits = r.limits();
  if (seq.is_string()) {
    const size_t size = seq.text().size();
    if (size > 0 &&
        static_cast<uint64_t>(times) > limits.max_output_bytes / size) {
      return absl::ResourceExhaustedError(absl::StrCat(
          "the template built a string of ", times, " times ", size,
          " bytes, more than the limit of ", limits.max_output_bytes));
    }
    RETURN_IF_ERROR(r.Reserve(size * static_cast<size_t>(times)));
    Str s;
    for (int64_t i = 0; i < times; ++i) Append(&s, seq.str());
    return Value::String(std::move(s));
  }
  const size_t size = seq.items().size();
  if (size > 0 && static_cast<uint64_t>(times) >
                      static_cast<uint64_t>(limits.max_steps) / size) {
    return r.Step(limits.max_steps + 1);
  }
  RETURN_IF_ERROR(r.Step(static_cast<int64_t>(size) * times));
  std::vector<Value> items;
  for (int64_t i = 0; i < times; ++i) {
    items.insert(items.end(), seq.items().begin(), seq.items().end());
  }
  if (seq.kind() == Value::Kind::kTuple) return Value::Tuple(std::move(items));
  return r.MakeList(std::move(items));
}

absl::StatusOr<Value> Multiply(Renderer& r, const std::string& /*op*/,
                               const Value& a, const Value& b) {
  if (BothInts(a, b)) {
    int64_t product = 0;
    if (__builtin_mul_overflow(a.int_value(), b.int_value(), &product)) {
      return Overflow();
    }
    return Value::Int(product);
  }
  if (BothNumbers(a, b)) return Value::Float(a.number() * b.number());
  if ((a.is_string() || a.is_sequence()) && b.is_integral()) {
    return Repeat(r, a, b.int_value());
  }
  if ((b.is_string() || b.is_sequence()) && a.is_integral()) {
    return Repeat(r, b, a.int_value());
  }
  return Invalid(
      absl::StrCat("can't multiply sequence by non-int of type '",
                   (a.is_string() || a.is_sequence() ? b : a).TypeName(), "'"));
}

absl::StatusOr<Value> Divide(Renderer& /*r*/, const std::string& op,
                             const Value& a, const Value& b) {
  if (!BothNumbers(a, b)) return Unsupported(op, a, b);
  if (b.number() == 0.0) return Invalid("division by zero");
  return Value::Float(a.number() / b.number());
}

// // and %, which on a string formats.
absl::StatusOr<Value> FloorDivOrMod(Renderer& r, const std::string& op,
                                    const Value& a, const Value& b) {
  const bool mod = op == "%";
  if (mod && a.is_string()) return r.Format(a, b);
  if (!BothNumbers(a, b)) return Unsupported(op, a, b);
  if (BothInts(a, b)) {
    if (b.int_value() == 0) {
      return Invalid("integer division or modulo by zero");
    }
    if (a.int_value() == std::numeric_limits<int64_t>::min() &&
        b.int_value() == -1) {
      if (mod) return Value::Int(0);
      return Overflow();
    }
    return Value::Int(mod ? FloorMod(a.int_value(), b.int_value())
                          : FloorDiv(a.int_value(), b.int_value()));
  }
  if (b.number() == 0.0) {
    return Invalid(mod ? "float modulo" : "float floor division by zero");
  }
  double div = 0;
  double rest = 0;
  FloatDivMod(a.number(), b.number(), &div, &rest);
  return Value::Float(mod ? rest : div);
}

absl::StatusOr<Value> Power(Renderer& /*r*/, const std::string& op,
                            const Value& a, const Value& b) {
  if (!BothNumbers(a, b)) return Unsupported(op, a, b);
  if (BothInts(a, b) && b.int_value() >= 0) {
    int64_t base = a.int_value();
    int64_t exp = b.int_value();
    int64_t result = 1;
    while (exp > 0) {
      if (exp & 1) {
        if (__builtin_mul_overflow(result, base, &result)) return Overflow();
      }
      exp >>= 1;
      if (exp > 0 && __builtin_mul_overflow(base, base, &base)) {
        return Overflow();
      }
    }
    return Value::Int(result);
  }
  const double x = a.number();
  const double y = b.number();
  if (x == 0.0 && y < 0) {
    return Invalid("0.0 cannot be raised to a negative power");
  }
  if (x < 0 && y != std::floor(y)) {
    return Invalid(
        "a negative number cannot be raised to a fractional "
        "power");
  }
  const double result = std::pow(x, y);
  if (std::isinf(result) && !std::isinf(x) && !std::isinf(y)) {
    return Invalid("numerical result out of range");
  }
  return Value::Float(result);
}

constexpr struct {
  std::string_view op;
  OperatorFn fn;
} kOperators[] = {
    {"+", Add},    {"-", Subtract},       {"*", Multiply},
    {"/", Divide}, {"//", FloorDivOrMod}, {"%", FloorDivOrMod},
    {"**", Power},
};

}  // namespace

absl::StatusOr<Value> Renderer::Binary(const std::string& op, const Value& a,
                                       const Value& b) {
  if (a.is_undefined()) return UndefinedError(a);
  if (b.is_undefined()) return UndefinedError(b);
  for (const auto& [name, fn] : kOperators) {
    if (op == name) return fn(*this, op, a, b);
  }
  return Invalid(absl::StrCat("unknown operator ", op));
}

absl::StatusOr<bool> Renderer::CompareOp(const std::string& op, const Value& a,
                                         const Value& b) {
  if (op == "==") return Equal(a, b);
  if (op == "!=") return !Equal(a, b);
  if (op == "in" || op == "notin") {
    bool found = false;
    switch (b.kind()) {
      case Value::Kind::kString:
        if (!a.is_string()) {
          if (a.is_undefined()) return UndefinedError(a);
          return Invalid(absl::StrCat(
              "'in <string>' requires string as left operand, not ",
              a.TypeName()));
        }
        found = b.text().find(a.text()) != std::string::npos;
        break;
      case Value::Kind::kList:
      case Value::Kind::kTuple:
        RETURN_IF_ERROR(Step(static_cast<int64_t>(b.items().size())));
        for (const Value& item : b.items()) {
          if (Equal(a, item)) {
            found = true;
            break;
          }
        }
        break;
      case Value::Kind::kDict:
        RETURN_IF_ERROR(Step(static_cast<int64_t>(b.dict().items.size())));
        found = b.dict().Find(a) != nullptr;
        break;
      case Value::Kind::kUndefined:
        break;
      default:
        return Invalid(absl::StrCat("argument of type '", b.TypeName(),
                                    "' is not iterable"));
    }
    return op == "in" ? found : !found;
  }
  if (a.is_undefined()) return UndefinedError(a);
  if (b.is_undefined()) return UndefinedError(b);
  const char* name = op.c_str();
  if (op == "<") return Less(a, b, name);
  if (op == ">") return Less(b, a, name);
  if (op == "<=" || op == ">=") {
    ASSIGN_OR_RETURN(bool less,
                     op == "<=" ? Less(a, b, name) : Less(b, a, name));
    return less || Equal(a, b);
  }
  return Invalid(absl::StrCat("unknown comparison ", op));
}

}  // namespace seqboat::jinja
