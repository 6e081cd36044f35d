// A render: the template's statements run in scopes, within the budget of
// Limits; and Template's Parse and Render over the lexer, the parser and
// this.
#include <memory>
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

bool NamesLine(absl::string_view message) {
  if (!absl::StartsWith(message, "line ")) return false;
  size_t i = 5;
  while (i < message.size() && absl::ascii_isdigit(message[i])) ++i;
  return i > 5 && absl::StartsWith(message.substr(i), ": ");
}

}  // namespace

absl::Status Invalid(std::string message) {
  return absl::InvalidArgumentError(std::move(message));
}

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

}  // namespace seqboat::jinja
