// Expressions evaluated to values, and calls of macros, globals and
// methods.
#include <algorithm>
#include <limits>
#include <memory>
#include <string_view>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "server/jinja/renderer.h"

namespace seqboat::jinja {
namespace {

constexpr std::string_view kGlobals[] = {
    "range",        "namespace", "dict",   "raise_exception",
    "strftime_now", "lipsum",    "cycler", "joiner"};

template <size_t N>
bool In(const std::string_view (&names)[N], std::string_view name) {
  return std::find(std::begin(names), std::end(names), name) != std::end(names);
}

}  // namespace

absl::StatusOr<Value> Renderer::Lookup(const std::string& name,
                                       const FramePtr& frame) {
  for (const Frame* f = frame.get(); f != nullptr; f = f->parent.get()) {
    if (const Value* v = f->Find(name)) return *v;
  }
  if (In(kGlobals, name)) {
    auto fn = std::make_shared<CallableData>();
    fn->type = CallableData::Type::kGlobal;
    fn->name = name;
    return Value::Callable(std::move(fn));
  }
  return Value::Undefined(absl::StrCat("'", name, "' is undefined"));
}

absl::Status Renderer::EvalArgs(const Expr& e, size_t first,
                                const FramePtr& frame, Args* args,
                                Kwargs* kwargs) {
  for (size_t i = first; i < e.args.size(); ++i) {
    ASSIGN_OR_RETURN(Value v, Eval(*e.args[i], frame));
    args->push_back(std::move(v));
  }
  for (const auto& [key, arg] : e.kwargs) {
    ASSIGN_OR_RETURN(Value v, Eval(*arg, frame));
    kwargs->emplace_back(key, std::move(v));
  }
  return absl::OkStatus();
}

absl::StatusOr<Value> Renderer::Eval(const Expr& e, const FramePtr& frame) {
  Depth depth(this);
  RETURN_IF_ERROR(AtLine(e.line, CheckDepth()));
  RETURN_IF_ERROR(AtLine(e.line, Step()));
  absl::StatusOr<Value> v = EvalNode(e, frame);
  if (!v.ok()) return AtLine(e.line, v.status());
  return v;
}

absl::StatusOr<Value> Renderer::EvalNode(const Expr& e, const FramePtr& frame) {
  using Type = Expr::Type;
  switch (e.type) {
    case Type::kConst:
      return e.value;
    case Type::kName:
      return Lookup(e.name, frame);
    case Type::kList:
    case Type::kTuple:
      return EvalList(e, frame);
    case Type::kDict:
      return EvalDict(e, frame);
    case Type::kGetattr: {
      ASSIGN_OR_RETURN(Value obj, Eval(*e.args[0], frame));
      return GetAttr(obj, e.name);
    }
    case Type::kGetitem:
      return EvalGetitem(e, frame);
    case Type::kSlice:
      return Invalid("a slice outside of a subscript");
    case Type::kCall: {
      ASSIGN_OR_RETURN(Value fn, Eval(*e.args[0], frame));
      Args args;
      Kwargs kwargs;
      RETURN_IF_ERROR(EvalArgs(e, 1, frame, &args, &kwargs));
      return Call(fn, std::move(args), std::move(kwargs));
    }
    case Type::kFilter:
      return EvalFilter(e, frame);
    case Type::kTest:
      return EvalTest(e, frame);
    case Type::kNeg:
    case Type::kPos:
      return EvalUnary(e, frame);
    case Type::kNot: {
      ASSIGN_OR_RETURN(Value v, Eval(*e.args[0], frame));
      return Value::Bool(!v.Truthy());
    }
    case Type::kBinary: {
      ASSIGN_OR_RETURN(Value a, Eval(*e.args[0], frame));
      ASSIGN_OR_RETURN(Value b, Eval(*e.args[1], frame));
      return Binary(e.name, a, b);
    }
    case Type::kConcat:
      return EvalConcat(e, frame);
    case Type::kCompare:
      return EvalCompare(e, frame);
    case Type::kAnd: {
      ASSIGN_OR_RETURN(Value left, Eval(*e.args[0], frame));
      if (!left.Truthy()) return left;
      return Eval(*e.args[1], frame);
    }
    case Type::kOr: {
      ASSIGN_OR_RETURN(Value left, Eval(*e.args[0], frame));
      if (left.Truthy()) return left;
      return Eval(*e.args[1], frame);
    }
    case Type::kCondExpr: {
      ASSIGN_OR_RETURN(Value cond, Eval(*e.args[1], frame));
      if (cond.Truthy()) return Eval(*e.args[0], frame);
      if (e.args[2] != nullptr) return Eval(*e.args[2], frame);
      return Value::Undefined(
          "the inline if-expression evaluated to false and no else section "
          "was defined");
    }
  }
  return Invalid("unknown expression");
}

absl::StatusOr<Value> Renderer::EvalList(const Expr& e, const FramePtr& frame) {
  std::vector<Value> items;
  for (const ExprPtr& arg : e.args) {
    ASSIGN_OR_RETURN(Value v, Eval(*arg, frame));
    items.push_back(std::move(v));
  }
  if (e.type == Expr::Type::kTuple) return Value::Tuple(std::move(items));
  return MakeList(std::move(items));
}

absl::StatusOr<Value> Renderer::EvalDict(const Expr& e, const FramePtr& frame) {
  std::vector<std::pair<Value, Value>> items;
  for (size_t i = 0; i + 1 < e.args.size(); i += 2) {
    ASSIGN_OR_RETURN(Value k, Eval(*e.args[i], frame));
    ASSIGN_OR_RETURN(Value v, Eval(*e.args[i + 1], frame));
    if (!k.is_string() && !k.is_number() && !k.is_none() &&
        k.kind() != Value::Kind::kTuple) {
      return Invalid(absl::StrCat("unhashable type: '", k.TypeName(), "'"));
    }
    items.emplace_back(std::move(k), std::move(v));
  }
  RETURN_IF_ERROR(Charge(items.size() * 2 * sizeof(Value)));
  return Value::Dict(std::move(items));
}

absl::StatusOr<Value> Renderer::EvalGetitem(const Expr& e,
                                            const FramePtr& frame) {
  ASSIGN_OR_RETURN(Value obj, Eval(*e.args[0], frame));
  const Expr& key = *e.args[1];
  if (key.type == Expr::Type::kSlice) {
    Value parts[3];
    for (int i = 0; i < 3; ++i) {
      if (key.args[i] == nullptr) continue;
      ASSIGN_OR_RETURN(parts[i], Eval(*key.args[i], frame));
    }
    return Slice(obj, parts[0], parts[1], parts[2]);
  }
  ASSIGN_OR_RETURN(Value k, Eval(key, frame));
  return GetItem(obj, k);
}

absl::StatusOr<Value> Renderer::EvalFilter(const Expr& e,
                                           const FramePtr& frame) {
  Value subject;
  if (e.args[0] != nullptr) {
    ASSIGN_OR_RETURN(subject, Eval(*e.args[0], frame));
  }
  Args args;
  Kwargs kwargs;
  RETURN_IF_ERROR(EvalArgs(e, 1, frame, &args, &kwargs));
  return Filter(e.name, std::move(subject), std::move(args), std::move(kwargs));
}

absl::StatusOr<Value> Renderer::EvalTest(const Expr& e, const FramePtr& frame) {
  ASSIGN_OR_RETURN(Value subject, Eval(*e.args[0], frame));
  Args args;
  Kwargs kwargs;
  RETURN_IF_ERROR(EvalArgs(e, 1, frame, &args, &kwargs));
  ASSIGN_OR_RETURN(bool result,
                   Test(e.name, subject, std::move(args), std::move(kwargs)));
  return Value::Bool(result);
}

absl::StatusOr<Value> Renderer::EvalUnary(const Expr& e,
                                          const FramePtr& frame) {
  const bool negate = e.type == Expr::Type::kNeg;
  ASSIGN_OR_RETURN(Value v, Eval(*e.args[0], frame));
  if (v.is_undefined()) return UndefinedError(v);
  if (!v.is_number()) {
    return Invalid(absl::StrCat("bad operand type for unary ",
                                negate ? "-" : "+", ": '", v.TypeName(), "'"));
  }
  if (v.kind() == Value::Kind::kFloat) {
    return Value::Float(negate ? -v.number() : v.number());
  }
  if (!negate) return Value::Int(v.int_value());
  if (v.int_value() == std::numeric_limits<int64_t>::min()) {
    return Invalid("integer overflow");
  }
  return Value::Int(-v.int_value());
}

absl::StatusOr<Value> Renderer::EvalConcat(const Expr& e,
                                           const FramePtr& frame) {
  Str out;
  for (const ExprPtr& arg : e.args) {
    ASSIGN_OR_RETURN(Value v, Eval(*arg, frame));
    const Str part = ToStr(v);
    if (out.text.size() + part.text.size() > limits_.max_output_bytes) {
      return Reserve(out.text.size() + part.text.size());
    }
    Append(&out, part);
  }
  return MakeString(std::move(out));
}

// a < b < c holds when each pair does; later operands are not evaluated
// once one does not.
absl::StatusOr<Value> Renderer::EvalCompare(const Expr& e,
                                            const FramePtr& frame) {
  ASSIGN_OR_RETURN(Value left, Eval(*e.args[0], frame));
  for (size_t i = 0; i < e.ops.size(); ++i) {
    ASSIGN_OR_RETURN(Value right, Eval(*e.args[i + 1], frame));
    ASSIGN_OR_RETURN(bool holds, CompareOp(e.ops[i], left, right));
    if (!holds) return Value::Bool(false);
    left = std::move(right);
  }
  return Value::Bool(true);
}

absl::StatusOr<Value> Renderer::Call(const Value& fn, Args args,
                                     Kwargs kwargs) {
  if (fn.is_undefined()) return UndefinedError(fn);
  if (!fn.is_callable()) {
    return Invalid(
        absl::StrCat("'", fn.TypeName(), "' object is not callable"));
  }
  const CallableData& c = fn.callable();
  switch (c.type) {
    case CallableData::Type::kGlobal:
      return CallGlobal(c.name, std::move(args), std::move(kwargs));
    case CallableData::Type::kMethod:
      return CallMethod(c.receiver, c.name, std::move(args), std::move(kwargs));
    case CallableData::Type::kMacro:
      return CallMacro(c, std::move(args), std::move(kwargs));
  }
  return Invalid("not callable");
}

absl::StatusOr<Value> Renderer::CallMacro(const CallableData& fn, Args args,
                                          Kwargs kwargs) {
  const Stmt& def = *static_cast<const Stmt*>(fn.macro);
  std::shared_ptr<void> scope = fn.scope.lock();
  if (scope == nullptr) {
    return Invalid(absl::StrCat("the macro '", fn.name,
                                "' is called outside the scope that defined "
                                "it"));
  }
  if (macro_depth_ >= limits_.max_nesting) {
    return absl::ResourceExhaustedError(
        absl::StrCat("macros call one another more than ", limits_.max_nesting,
                     " levels deep"));
  }
  if (args.size() > def.params.size()) {
    return Invalid(absl::StrCat("macro '", fn.name, "' takes not more than ",
                                def.params.size(), " argument(s)"));
  }
  auto frame = std::make_shared<Frame>();
  frame->parent = std::static_pointer_cast<Frame>(scope);
  std::vector<bool> bound(def.params.size(), false);
  for (size_t i = 0; i < args.size(); ++i) {
    frame->Set(def.params[i].first, std::move(args[i]));
    bound[i] = true;
  }
  for (auto& [key, value] : kwargs) {
    size_t i = 0;
    while (i < def.params.size() && def.params[i].first != key) ++i;
    if (i == def.params.size()) {
      return Invalid(absl::StrCat("macro '", fn.name,
                                  "' takes no keyword argument '", key, "'"));
    }
    if (bound[i]) {
      return Invalid(absl::StrCat("macro '", fn.name,
                                  "' got multiple values for argument '", key,
                                  "'"));
    }
    frame->Set(key, std::move(value));
    bound[i] = true;
  }
  for (size_t i = 0; i < def.params.size(); ++i) {
    if (bound[i]) continue;
    if (def.params[i].second != nullptr) {
      ASSIGN_OR_RETURN(Value v, Eval(*def.params[i].second, frame));
      frame->Set(def.params[i].first, std::move(v));
    } else {
      frame->Set(def.params[i].first, Value::Undefined(absl::StrCat(
                                          "parameter '", def.params[i].first,
                                          "' was not provided")));
    }
  }
  ++macro_depth_;
  Str out;
  absl::StatusOr<Flow> flow = Exec(def.body, frame, &out);
  --macro_depth_;
  if (!flow.ok()) return flow.status();
  return MakeString(std::move(out));
}

}  // namespace seqboat::jinja
