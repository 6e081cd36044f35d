// One rendering of a parsed template: scopes, statements and the budget of
// Limits (render.cc), expressions and calls (eval.cc), attributes, items and
// slices (access.cc), operators (operators.cc), % formatting (format.cc),
// and the builtin filters, tests, methods and globals (builtins.h). Internal
// to //server/jinja.
#ifndef SEQBOAT_SERVER_JINJA_RENDERER_H_
#define SEQBOAT_SERVER_JINJA_RENDERER_H_

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "server/jinja/ast.h"
#include "server/jinja/template.h"
#include "server/jinja/value.h"

namespace seqboat::jinja {

using Args = std::vector<Value>;
using Kwargs = std::vector<std::pair<std::string, Value>>;

// A builtin's parameter, for BindArgs: required when it has no default.
struct Param {
  const char* name;
  std::optional<Value> default_value;
};

// Python's binding of positional and keyword arguments to `params`: the
// values in parameter order, or a TypeError-like error naming `function`.
absl::StatusOr<std::vector<Value>> BindArgs(const std::string& function,
                                            Args args, Kwargs kwargs,
                                            const std::vector<Param>& params);

// The error of using an undefined value ("'x' is undefined").
absl::Status UndefinedError(const Value& v);
// INVALID_ARGUMENT: what Python raises as a TypeError or a ValueError.
absl::Status Invalid(std::string message);

class Renderer {
 public:
  Renderer(const Limits& limits, absl::Time now);

  absl::StatusOr<Str> Run(const Body& body, const Variables& variables);

  // --- for the builtins
  const Limits& limits() const { return limits_; }
  // strftime_now's time.
  absl::Time now() const { return now_; }
  absl::Status Step(int64_t n = 1);
  // Counts a string about to be built against the longest string and the
  // total work.
  absl::Status Reserve(size_t bytes);
  // Counts other bytes built (lists, dicts) against the total work.
  absl::Status Charge(size_t bytes);
  absl::StatusOr<Value> MakeString(Str s);
  absl::StatusOr<Value> MakeList(std::vector<Value> items);
  absl::StatusOr<std::vector<Value>> Iterate(const Value& v);
  absl::StatusOr<Value> GetAttr(const Value& obj, const std::string& name);
  absl::StatusOr<Value> GetItem(const Value& obj, const Value& key);
  // `attribute` as Jinja's filters take it: "a.b" or "0" steps, by item.
  absl::StatusOr<Value> GetPath(const Value& obj, const Value& attribute);
  absl::StatusOr<Value> Call(const Value& fn, Args args, Kwargs kwargs);
  absl::StatusOr<Value> CallMethod(const Value& self, const std::string& name,
                                   Args args, Kwargs kwargs);
  absl::StatusOr<Value> Filter(const std::string& name, Value subject,
                               Args args, Kwargs kwargs);
  absl::StatusOr<bool> Test(const std::string& name, const Value& subject,
                            Args args, Kwargs kwargs);
  static bool HasFilter(const std::string& name);
  static bool HasTest(const std::string& name);
  absl::StatusOr<Value> Binary(const std::string& op, const Value& a,
                               const Value& b);
  absl::StatusOr<bool> CompareOp(const std::string& op, const Value& a,
                                 const Value& b);
  // Python's str % args.
  absl::StatusOr<Value> Format(const Value& format, const Value& args);

 private:
  struct Frame {
    std::vector<std::pair<std::string, Value>> vars;
    std::shared_ptr<Frame> parent;
    const Value* Find(const std::string& name) const;
    void Set(const std::string& name, Value value);
  };
  using FramePtr = std::shared_ptr<Frame>;
  enum class Flow { kNormal, kBreak, kContinue };

  // Counts one level of render recursion for as long as it lives.
  class Depth {
   public:
    explicit Depth(Renderer* r) : r_(r) { ++r_->depth_; }
    ~Depth() { --r_->depth_; }

   private:
    Renderer* r_;
  };
  absl::Status CheckDepth() const;

  absl::StatusOr<Flow> Exec(const Body& body, const FramePtr& frame, Str* out);
  absl::StatusOr<Flow> ExecOne(const Stmt& stmt, const FramePtr& frame,
                               Str* out);
  absl::StatusOr<Flow> ExecFor(const Stmt& stmt, const FramePtr& frame,
                               Str* out);
  absl::Status Assign(const Target& target, Value value, const FramePtr& frame,
                      int line);
  absl::Status Output(Str* out, const Str& text);
  absl::StatusOr<Value> Eval(const Expr& e, const FramePtr& frame);
  absl::StatusOr<Value> EvalNode(const Expr& e, const FramePtr& frame);
  // EvalNode's larger cases.
  absl::StatusOr<Value> EvalList(const Expr& e, const FramePtr& frame);
  absl::StatusOr<Value> EvalDict(const Expr& e, const FramePtr& frame);
  absl::StatusOr<Value> EvalGetitem(const Expr& e, const FramePtr& frame);
  absl::StatusOr<Value> EvalFilter(const Expr& e, const FramePtr& frame);
  absl::StatusOr<Value> EvalTest(const Expr& e, const FramePtr& frame);
  absl::StatusOr<Value> EvalUnary(const Expr& e, const FramePtr& frame);
  absl::StatusOr<Value> EvalConcat(const Expr& e, const FramePtr& frame);
  absl::StatusOr<Value> EvalCompare(const Expr& e, const FramePtr& frame);
  absl::Status EvalArgs(const Expr& e, size_t first, const FramePtr& frame,
                        Args* args, Kwargs* kwargs);
  absl::StatusOr<Value> Lookup(const std::string& name, const FramePtr& frame);
  absl::StatusOr<Value> Slice(const Value& obj, const Value& start,
                              const Value& stop, const Value& step);
  absl::StatusOr<Value> CallMacro(const CallableData& fn, Args args,
                                  Kwargs kwargs);
  absl::StatusOr<Value> CallGlobal(const std::string& name, Args args,
                                   Kwargs kwargs);

  const Limits limits_;
  const absl::Time now_;
  int64_t steps_ = 0;
  size_t work_bytes_ = 0;
  int depth_ = 0;
  int macro_depth_ = 0;
};

// Prefixes an error with the line it happened on, unless it names one.
absl::Status AtLine(int line, absl::Status status);

}  // namespace seqboat::jinja

#endif  // SEQBOAT_SERVER_JINJA_RENDERER_H_
