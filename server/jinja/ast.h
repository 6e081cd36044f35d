// The parsed template: expressions and statements as Jinja's parser builds
// them (its node names), with the line each came from. Internal to
// //server/jinja.
#ifndef SEQBOAT_SERVER_JINJA_AST_H_
#define SEQBOAT_SERVER_JINJA_AST_H_

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "server/jinja/value.h"

namespace seqboat::jinja {

struct Expr;
using ExprPtr = std::unique_ptr<Expr>;

struct Expr {
  enum class Type {
    kConst,     // value
    kName,      // name
    kList,      // args: items
    kTuple,     // args: items
    kDict,      // args: key, value, key, value...
    kGetattr,   // args[0].name
    kGetitem,   // args[0][args[1]]
    kSlice,     // args: start, stop, step (each may be null)
    kCall,      // args[0](args[1:], kwargs)
    kFilter,    // args[0] | name(args[1:], kwargs); args[0] null in a
                // {% set %} block's filter
    kTest,      // args[0] is name(args[1:], kwargs)
    kNeg,       // -args[0]
    kPos,       // +args[0]
    kNot,       // not args[0]
    kBinary,    // args[0] name args[1]: + - * / // % **
    kConcat,    // args[0] ~ args[1]
    kCompare,   // args[0] ops[0] args[1] ops[1] args[2]...
    kAnd,       // args[0] and args[1]
    kOr,        // args[0] or args[1]
    kCondExpr,  // args[0] if args[1] else args[2] (may be null)
  };
  Type type = Type::kConst;
  int line = 0;
  int depth = 1;  // 1 + the deepest operand's
  Value value;
  std::string name;
  std::vector<ExprPtr> args;
  std::vector<std::pair<std::string, ExprPtr>> kwargs;
  std::vector<std::string>
      ops;  // "==", "!=", "<", "<=", ">", ">=", "in", "notin"
};

struct Stmt;
using Body = std::vector<std::unique_ptr<Stmt>>;

// Where {% set %} and {% for %} put values: names (several: unpacking), or
// one namespace attribute.
struct Target {
  std::vector<std::string> names;
  bool unpack = false;  // "a, b" (even "a,")
  std::string ns_attr;  // set only: names[0].ns_attr
};

struct Stmt {
  enum class Type {
    kData,      // text
    kOutput,    // {{ expr }}
    kIf,        // branches, else_body
    kFor,       // for target in expr [if filter]: body else else_body
    kSet,       // set target = expr
    kSetBlock,  // set target [| filters]: body
    kMacro,     // macro name(params): body
    kBreak,
    kContinue,
    kBody,  // {% generation %}: body as it is
  };
  Type type = Type::kData;
  int line = 0;
  std::string text;
  ExprPtr expr;
  std::vector<std::pair<ExprPtr, Body>> branches;
  Body body;
  Body else_body;
  Target target;
  ExprPtr filter;                                       // kFor's "if"
  std::vector<ExprPtr> filters;                         // kSetBlock's
  std::string name;                                     // kMacro
  std::vector<std::pair<std::string, ExprPtr>> params;  // default may be null
};

}  // namespace seqboat::jinja

#endif  // SEQBOAT_SERVER_JINJA_AST_H_
