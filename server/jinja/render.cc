#include <algorithm>
#include <cmath>
#include <limits>
#include <string_view>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "server/jinja/lexer.h"
#include "server/jinja/parser.h"
#include "server/jinja/renderer.h"
#include "server/jinja/template.h"

namespace seqboat::jinja {
namespace {

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
constexpr std::string_view kGlobals[] = {
    "range",        "namespace", "dict",   "raise_exception",
    "strftime_now", "lipsum",    "cycler", "joiner"};

template <size_t N>
bool In(const std::string_view (&names)[N], std::string_view name) {
  return std::find(std::begin(names), std::end(names), name) != std::end(names);
}

absl::Status Invalid(std::string message) {
  return absl::InvalidArgumentError(std::move(message));
}

bool NamesLine(absl::string_view message) {
  if (!absl::StartsWith(message, "line ")) return false;
  size_t i = 5;
  while (i < message.size() && absl::ascii_isdigit(message[i])) ++i;
  return i > 5 && absl::StartsWith(message.substr(i), ": ");
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

absl::StatusOr<int64_t> SliceIndex(const Value& v) {
  if (v.is_integral()) return v.int_value();
  return Invalid(
      "slice indices must be integers or None or have an __index__ method");
}

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

}  // namespace

absl::Status AtLine(int line, absl::Status status) {
  if (status.ok() || status.code() == absl::StatusCode::kAborted ||
      NamesLine(status.message())) {
    return status;
  }
  return absl::Status(status.code(),
                      absl::StrCat("line ", line, ": ", status.message()));
}

absl::Status UndefinedError(const Value& v) {
  const std::string& hint = v.undefined_hint();
  return Invalid(hint.empty() ? "a value is undefined" : hint);
}

absl::StatusOr<std::vector<Value>> BindArgs(const std::string& function,
                                            Args args, Kwargs kwargs,
                                            const std::vector<Param>& params) {
  if (args.size() > params.size()) {
    return Invalid(absl::StrCat(function, "() takes at most ", params.size(),
                                " arguments (", args.size(), " given)"));
  }
  std::vector<std::optional<Value>> bound(params.size());
  for (size_t i = 0; i < args.size(); ++i) bound[i] = std::move(args[i]);
  for (auto& [key, value] : kwargs) {
    size_t i = 0;
    while (i < params.size() && key != params[i].name) ++i;
    if (i == params.size()) {
      return Invalid(absl::StrCat(
          function, "() got an unexpected keyword argument '", key, "'"));
    }
    if (bound[i].has_value()) {
      return Invalid(
          absl::StrCat(function, "() got multiple values for '", key, "'"));
    }
    bound[i] = std::move(value);
  }
  std::vector<Value> out;
  out.reserve(params.size());
  for (size_t i = 0; i < params.size(); ++i) {
    if (bound[i].has_value()) {
      out.push_back(*std::move(bound[i]));
    } else if (params[i].default_value.has_value()) {
      out.push_back(*params[i].default_value);
    } else {
      return Invalid(absl::StrCat(function, "() missing required argument '",
                                  params[i].name, "'"));
    }
  }
  return out;
}

// --- Template

absl::StatusOr<std::unique_ptr<Template>> Template::Parse(
    std::string_view source, const Limits& limits) {
  if (source.size() > limits.max_source_bytes) {
    return absl::InvalidArgumentError(absl::StrCat(
        "the template is ", source.size(), " bytes, more than the limit of ",
        limits.max_source_bytes));
  }
  ASSIGN_OR_RETURN(std::vector<Token> tokens, Tokenize(source));
  std::unique_ptr<Template> t(new Template());
  ASSIGN_OR_RETURN(t->body_,
                   ParseTemplate(std::move(tokens), limits.max_nesting));
  t->limits_ = limits;
  return t;
}

Template::~Template() = default;

absl::StatusOr<Str> Template::Render(const Variables& variables,
                                     absl::Time now) const {
  return Renderer(limits_, now).Run(body_, variables);
}

// --- Renderer: frames, budget

const Value* Renderer::Frame::Find(const std::string& name) const {
  for (const auto& [k, v] : vars) {
    if (k == name) return &v;
  }
  return nullptr;
}

void Renderer::Frame::Set(const std::string& name, Value value) {
  for (auto& [k, v] : vars) {
    if (k == name) {
      v = std::move(value);
      return;
    }
  }
  vars.emplace_back(name, std::move(value));
}

Renderer::Renderer(const Limits& limits, absl::Time now)
    : limits_(limits), now_(now) {}

absl::Status Renderer::Step(int64_t n) {
  steps_ += n;
  if (steps_ > limits_.max_steps) {
    return absl::ResourceExhaustedError(absl::StrCat(
        "the template ran more than ", limits_.max_steps, " steps"));
  }
  return absl::OkStatus();
}

absl::Status Renderer::Reserve(size_t bytes) {
  if (bytes > limits_.max_output_bytes) {
    return absl::ResourceExhaustedError(absl::StrCat(
        "the template built a string of ", bytes,
        " bytes, more than the limit of ", limits_.max_output_bytes));
  }
  return Charge(bytes);
}

absl::Status Renderer::Charge(size_t bytes) {
  work_bytes_ += bytes;
  if (work_bytes_ > limits_.max_work_bytes) {
    return absl::ResourceExhaustedError(
        absl::StrCat("the template built more than ", limits_.max_work_bytes,
                     " bytes of strings"));
  }
  return absl::OkStatus();
}

absl::Status Renderer::CheckDepth() const {
  if (depth_ > 4 * limits_.max_nesting) {
    return absl::ResourceExhaustedError(
        absl::StrCat("the template recursed more than ",
                     4 * limits_.max_nesting, " levels"));
  }
  return absl::OkStatus();
}

absl::StatusOr<Value> Renderer::MakeString(Str s) {
  RETURN_IF_ERROR(Reserve(s.text.size()));
  return Value::String(std::move(s));
}

absl::StatusOr<Value> Renderer::MakeList(std::vector<Value> items) {
  RETURN_IF_ERROR(Charge(items.size() * sizeof(Value)));
  return Value::List(std::move(items));
}

absl::StatusOr<Str> Renderer::Run(const Body& body,
                                  const Variables& variables) {
  auto root = std::make_shared<Frame>();
  for (const auto& [name, value] : variables) root->Set(name, value);
  Str out;
  RETURN_IF_ERROR(Exec(body, root, &out).status());
  return out;
}

// --- statements

absl::Status Renderer::Output(Str* out, const Str& text) {
  if (out->text.size() + text.text.size() > limits_.max_output_bytes) {
    return absl::ResourceExhaustedError(
        absl::StrCat("the rendered text is over the limit of ",
                     limits_.max_output_bytes, " bytes"));
  }
  RETURN_IF_ERROR(Charge(text.text.size()));
  Append(out, text);
  return absl::OkStatus();
}

absl::StatusOr<Renderer::Flow> Renderer::Exec(const Body& body,
                                              const FramePtr& frame, Str* out) {
  for (const std::unique_ptr<Stmt>& stmt : body) {
    ASSIGN_OR_RETURN(Flow flow, ExecOne(*stmt, frame, out));
    if (flow != Flow::kNormal) return flow;
  }
  return Flow::kNormal;
}

absl::StatusOr<Renderer::Flow> Renderer::ExecOne(const Stmt& stmt,
                                                 const FramePtr& frame,
                                                 Str* out) {
  Depth depth(this);
  RETURN_IF_ERROR(AtLine(stmt.line, CheckDepth()));
  RETURN_IF_ERROR(AtLine(stmt.line, Step()));
  switch (stmt.type) {
    case Stmt::Type::kData:
      RETURN_IF_ERROR(AtLine(stmt.line, Output(out, Trusted(stmt.text))));
      return Flow::kNormal;
    case Stmt::Type::kOutput: {
      ASSIGN_OR_RETURN(Value v, Eval(*stmt.expr, frame));
      RETURN_IF_ERROR(AtLine(stmt.line, Output(out, ToStr(v))));
      return Flow::kNormal;
    }
    case Stmt::Type::kIf:
      for (const auto& [test, body] : stmt.branches) {
        ASSIGN_OR_RETURN(Value v, Eval(*test, frame));
        if (v.Truthy()) return Exec(body, frame, out);
      }
      return Exec(stmt.else_body, frame, out);
    case Stmt::Type::kFor:
      return ExecFor(stmt, frame, out);
    case Stmt::Type::kSet: {
      ASSIGN_OR_RETURN(Value v, Eval(*stmt.expr, frame));
      RETURN_IF_ERROR(Assign(stmt.target, std::move(v), frame, stmt.line));
      return Flow::kNormal;
    }
    case Stmt::Type::kSetBlock: {
      Str captured;
      ASSIGN_OR_RETURN(Flow flow, Exec(stmt.body, frame, &captured));
      ASSIGN_OR_RETURN(Value v, MakeString(std::move(captured)));
      for (const ExprPtr& filter : stmt.filters) {
        Args args;
        Kwargs kwargs;
        RETURN_IF_ERROR(EvalArgs(*filter, 1, frame, &args, &kwargs));
        absl::StatusOr<Value> filtered = Filter(
            filter->name, std::move(v), std::move(args), std::move(kwargs));
        if (!filtered.ok()) return AtLine(filter->line, filtered.status());
        v = *std::move(filtered);
      }
      RETURN_IF_ERROR(Assign(stmt.target, std::move(v), frame, stmt.line));
      return flow;
    }
    case Stmt::Type::kMacro: {
      auto fn = std::make_shared<CallableData>();
      fn->type = CallableData::Type::kMacro;
      fn->name = stmt.name;
      fn->macro = &stmt;
      fn->scope = frame;
      frame->Set(stmt.name, Value::Callable(std::move(fn)));
      return Flow::kNormal;
    }
    case Stmt::Type::kBreak:
      return Flow::kBreak;
    case Stmt::Type::kContinue:
      return Flow::kContinue;
    case Stmt::Type::kBody:
      return Exec(stmt.body, frame, out);
  }
  return Flow::kNormal;
}

absl::Status Renderer::Assign(const Target& target, Value value,
                              const FramePtr& frame, int line) {
  if (!target.ns_attr.empty()) {
    ASSIGN_OR_RETURN(Value ns, Lookup(target.names[0], frame));
    if (!ns.is_namespace() || ns.ns().loop) {
      return AtLine(line,
                    Invalid("cannot assign attribute on non-namespace object"));
    }
    if (ContainsNamespace(value)) {
      return AtLine(line, Invalid("a namespace attribute cannot hold a "
                                  "namespace or a loop object"));
    }
    ns.ns().Set(target.ns_attr, std::move(value));
    return absl::OkStatus();
  }
  if (!target.unpack) {
    frame->Set(target.names[0], std::move(value));
    return absl::OkStatus();
  }
  absl::StatusOr<std::vector<Value>> items = Iterate(value);
  if (!items.ok()) {
    return AtLine(line, Invalid(absl::StrCat("cannot unpack non-iterable ",
                                             value.TypeName(), " object")));
  }
  if (items->size() != target.names.size()) {
    return AtLine(
        line,
        Invalid(items->size() > target.names.size()
                    ? absl::StrCat("too many values to unpack (expected ",
                                   target.names.size(), ")")
                    : absl::StrCat("not enough values to unpack (expected ",
                                   target.names.size(), ", got ", items->size(),
                                   ")")));
  }
  for (size_t i = 0; i < items->size(); ++i) {
    frame->Set(target.names[i], std::move((*items)[i]));
  }
  return absl::OkStatus();
}

absl::StatusOr<Renderer::Flow> Renderer::ExecFor(const Stmt& stmt,
                                                 const FramePtr& frame,
                                                 Str* out) {
  ASSIGN_OR_RETURN(Value iterable, Eval(*stmt.expr, frame));
  absl::StatusOr<std::vector<Value>> all = Iterate(iterable);
  if (!all.ok()) return AtLine(stmt.line, all.status());
  std::vector<Value> items;
  if (stmt.filter == nullptr) {
    items = *std::move(all);
  } else {
    for (Value& item : *all) {
      auto scope = std::make_shared<Frame>();
      scope->parent = frame;
      RETURN_IF_ERROR(Assign(stmt.target, item, scope, stmt.line));
      ASSIGN_OR_RETURN(Value keep, Eval(*stmt.filter, scope));
      if (keep.Truthy()) items.push_back(std::move(item));
    }
  }
  const int64_t n = static_cast<int64_t>(items.size());
  if (n == 0) {
    auto scope = std::make_shared<Frame>();
    scope->parent = frame;
    ASSIGN_OR_RETURN(Flow flow, Exec(stmt.else_body, scope, out));
    (void)flow;  // break and continue belong to an enclosing loop's body
    return Flow::kNormal;
  }
  for (int64_t i = 0; i < n; ++i) {
    RETURN_IF_ERROR(AtLine(stmt.line, Step()));
    auto scope = std::make_shared<Frame>();
    scope->parent = frame;
    RETURN_IF_ERROR(Assign(stmt.target, items[i], scope, stmt.line));
    auto loop = std::make_shared<NamespaceData>();
    loop->loop = true;
    loop->attrs = {
        {"index", Value::Int(i + 1)},
        {"index0", Value::Int(i)},
        {"revindex", Value::Int(n - i)},
        {"revindex0", Value::Int(n - i - 1)},
        {"first", Value::Bool(i == 0)},
        {"last", Value::Bool(i == n - 1)},
        {"length", Value::Int(n)},
        {"depth", Value::Int(1)},
        {"depth0", Value::Int(0)},
        {"previtem",
         i > 0 ? items[i - 1] : Value::Undefined("there is no previous item")},
        {"nextitem",
         i + 1 < n ? items[i + 1] : Value::Undefined("there is no next item")},
    };
    scope->Set("loop", Value::Namespace(std::move(loop)));
    ASSIGN_OR_RETURN(Flow flow, Exec(stmt.body, scope, out));
    if (flow == Flow::kBreak) break;
  }
  return Flow::kNormal;
}

// --- expressions

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
    case Type::kTuple: {
      std::vector<Value> items;
      for (const ExprPtr& arg : e.args) {
        ASSIGN_OR_RETURN(Value v, Eval(*arg, frame));
        items.push_back(std::move(v));
      }
      if (e.type == Type::kTuple) return Value::Tuple(std::move(items));
      return MakeList(std::move(items));
    }
    case Type::kDict: {
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
    case Type::kGetattr: {
      ASSIGN_OR_RETURN(Value obj, Eval(*e.args[0], frame));
      return GetAttr(obj, e.name);
    }
    case Type::kGetitem: {
      ASSIGN_OR_RETURN(Value obj, Eval(*e.args[0], frame));
      const Expr& key = *e.args[1];
      if (key.type == Type::kSlice) {
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
    case Type::kSlice:
      return Invalid("a slice outside of a subscript");
    case Type::kCall: {
      ASSIGN_OR_RETURN(Value fn, Eval(*e.args[0], frame));
      Args args;
      Kwargs kwargs;
      RETURN_IF_ERROR(EvalArgs(e, 1, frame, &args, &kwargs));
      return Call(fn, std::move(args), std::move(kwargs));
    }
    case Type::kFilter: {
      Value subject;
      if (e.args[0] != nullptr) {
        ASSIGN_OR_RETURN(subject, Eval(*e.args[0], frame));
      }
      Args args;
      Kwargs kwargs;
      RETURN_IF_ERROR(EvalArgs(e, 1, frame, &args, &kwargs));
      return Filter(e.name, std::move(subject), std::move(args),
                    std::move(kwargs));
    }
    case Type::kTest: {
      ASSIGN_OR_RETURN(Value subject, Eval(*e.args[0], frame));
      Args args;
      Kwargs kwargs;
      RETURN_IF_ERROR(EvalArgs(e, 1, frame, &args, &kwargs));
      ASSIGN_OR_RETURN(bool result, Test(e.name, subject, std::move(args),
                                         std::move(kwargs)));
      return Value::Bool(result);
    }
    case Type::kNeg:
    case Type::kPos: {
      ASSIGN_OR_RETURN(Value v, Eval(*e.args[0], frame));
      if (v.is_undefined()) return UndefinedError(v);
      if (!v.is_number()) {
        return Invalid(absl::StrCat("bad operand type for unary ",
                                    e.type == Type::kNeg ? "-" : "+", ": '",
                                    v.TypeName(), "'"));
      }
      if (v.kind() == Value::Kind::kFloat) {
        return Value::Float(e.type == Type::kNeg ? -v.number() : v.number());
      }
      if (e.type == Type::kPos) return Value::Int(v.int_value());
      if (v.int_value() == std::numeric_limits<int64_t>::min()) {
        return Overflow();
      }
      return Value::Int(-v.int_value());
    }
    case Type::kNot: {
      ASSIGN_OR_RETURN(Value v, Eval(*e.args[0], frame));
      return Value::Bool(!v.Truthy());
    }
    case Type::kBinary: {
      ASSIGN_OR_RETURN(Value a, Eval(*e.args[0], frame));
      ASSIGN_OR_RETURN(Value b, Eval(*e.args[1], frame));
      return Binary(e.name, a, b);
    }
    case Type::kConcat: {
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
    case Type::kCompare: {
      ASSIGN_OR_RETURN(Value left, Eval(*e.args[0], frame));
      for (size_t i = 0; i < e.ops.size(); ++i) {
        ASSIGN_OR_RETURN(Value right, Eval(*e.args[i + 1], frame));
        ASSIGN_OR_RETURN(bool holds, CompareOp(e.ops[i], left, right));
        if (!holds) return Value::Bool(false);
        left = std::move(right);
      }
      return Value::Bool(true);
    }
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

// --- attributes, items, slices

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
      int64_t n = 0;
      if (is_string) {
        offsets = CodePointOffsets(obj.text());
        n = static_cast<int64_t>(offsets.size()) - 1;
      } else {
        n = static_cast<int64_t>(obj.items().size());
      }
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
  int64_t n = 0;
  if (is_string) {
    offsets = CodePointOffsets(obj.text());
    n = static_cast<int64_t>(offsets.size()) - 1;
  } else {
    n = static_cast<int64_t>(obj.items().size());
  }
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

// --- calls

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

// --- operators

absl::StatusOr<Value> Renderer::Binary(const std::string& op, const Value& a,
                                       const Value& b) {
  using Kind = Value::Kind;
  if (a.is_undefined()) return UndefinedError(a);
  if (b.is_undefined()) return UndefinedError(b);
  const auto unsupported = [&] {
    return Invalid(absl::StrCat("unsupported operand type(s) for ", op, ": '",
                                a.TypeName(), "' and '", b.TypeName(), "'"));
  };
  const bool ints = a.is_integral() && b.is_integral();
  const bool numbers = a.is_number() && b.is_number();
  if (op == "+") {
    if (ints) {
      int64_t r = 0;
      if (__builtin_add_overflow(a.int_value(), b.int_value(), &r)) {
        return Overflow();
      }
      return Value::Int(r);
    }
    if (numbers) return Value::Float(a.number() + b.number());
    if (a.is_string() && b.is_string()) {
      RETURN_IF_ERROR(Reserve(a.text().size() + b.text().size()));
      Str s = a.str();
      Append(&s, b.str());
      return Value::String(std::move(s));
    }
    if (a.kind() == b.kind() && a.is_sequence()) {
      std::vector<Value> items = a.items();
      items.insert(items.end(), b.items().begin(), b.items().end());
      RETURN_IF_ERROR(Step(static_cast<int64_t>(items.size())));
      if (a.kind() == Kind::kTuple) return Value::Tuple(std::move(items));
      return MakeList(std::move(items));
    }
    if (a.is_string() || a.kind() == Kind::kList) {
      return Invalid(absl::StrCat("can only concatenate ", a.TypeName(),
                                  " (not \"", b.TypeName(), "\") to ",
                                  a.TypeName()));
    }
    return unsupported();
  }
  if (op == "-") {
    if (ints) {
      int64_t r = 0;
      if (__builtin_sub_overflow(a.int_value(), b.int_value(), &r)) {
        return Overflow();
      }
      return Value::Int(r);
    }
    if (numbers) return Value::Float(a.number() - b.number());
    return unsupported();
  }
  if (op == "*") {
    if (ints) {
      int64_t r = 0;
      if (__builtin_mul_overflow(a.int_value(), b.int_value(), &r)) {
        return Overflow();
      }
      return Value::Int(r);
    }
    if (numbers) return Value::Float(a.number() * b.number());
    const Value* seq = nullptr;
    const Value* count = nullptr;
    if ((a.is_string() || a.is_sequence()) && b.is_integral()) {
      seq = &a;
      count = &b;
    } else if ((b.is_string() || b.is_sequence()) && a.is_integral()) {
      seq = &b;
      count = &a;
    }
    if (seq == nullptr) {
      return Invalid(absl::StrCat(
          "can't multiply sequence by non-int of type '",
          (a.is_string() || a.is_sequence() ? b : a).TypeName(), "'"));
    }
    const int64_t times = std::max<int64_t>(0, count->int_value());
    if (seq->is_string()) {
      const size_t size = seq->text().size();
      if (size > 0 &&
          static_cast<uint64_t>(times) > limits_.max_output_bytes / size) {
        return absl::ResourceExhaustedError(absl::StrCat(
            "the template built a string of ", times, " times ", size,
            " bytes, more than the limit of ", limits_.max_output_bytes));
      }
      RETURN_IF_ERROR(Reserve(size * static_cast<size_t>(times)));
      Str s;
      for (int64_t i = 0; i < times; ++i) Append(&s, seq->str());
      return Value::String(std::move(s));
    }
    const size_t size = seq->items().size();
    if (size > 0 && static_cast<uint64_t>(times) >
                        static_cast<uint64_t>(limits_.max_steps) / size) {
      return Step(limits_.max_steps + 1);
    }
    RETURN_IF_ERROR(Step(static_cast<int64_t>(size) * times));
    std::vector<Value> items;
    for (int64_t i = 0; i < times; ++i) {
      items.insert(items.end(), seq->items().begin(), seq->items().end());
    }
    if (seq->kind() == Kind::kTuple) return Value::Tuple(std::move(items));
    return MakeList(std::move(items));
  }
  if (op == "/") {
    if (!numbers) return unsupported();
    if (b.number() == 0.0) return Invalid("division by zero");
    return Value::Float(a.number() / b.number());
  }
  if (op == "//" || op == "%") {
    if (op == "%" && a.is_string()) return Format(a, b);
    if (!numbers) return unsupported();
    if (ints) {
      if (b.int_value() == 0) {
        return Invalid("integer division or modulo by zero");
      }
      if (a.int_value() == std::numeric_limits<int64_t>::min() &&
          b.int_value() == -1) {
        if (op == "%") return Value::Int(0);
        return Overflow();
      }
      return Value::Int(op == "//" ? FloorDiv(a.int_value(), b.int_value())
                                   : FloorMod(a.int_value(), b.int_value()));
    }
    if (b.number() == 0.0) {
      return Invalid(op == "//" ? "float floor division by zero"
                                : "float modulo");
    }
    double div = 0;
    double mod = 0;
    FloatDivMod(a.number(), b.number(), &div, &mod);
    return Value::Float(op == "//" ? div : mod);
  }
  if (op == "**") {
    if (!numbers) return unsupported();
    if (ints && b.int_value() >= 0) {
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
    const double r = std::pow(x, y);
    if (std::isinf(r) && !std::isinf(x) && !std::isinf(y)) {
      return Invalid("numerical result out of range");
    }
    return Value::Float(r);
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
