// Jinja2's expression grammar, with its precedence: conditional
// expressions, or/and/not, comparison chains (in, not in), + - ~ * / // %
// **, unary signs, filters and tests, calls, attributes, subscripts and
// slices, and literals (tuples, lists, dicts). The statement parser
// (parser.cc) builds on it. Internal to //server/jinja.
#ifndef SEQBOAT_SERVER_JINJA_EXPRESSION_PARSER_H_
#define SEQBOAT_SERVER_JINJA_EXPRESSION_PARSER_H_

#include <initializer_list>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "server/jinja/ast.h"
#include "server/jinja/lexer.h"
#include "server/jinja/parse_cursor.h"

namespace seqboat::jinja {

class ExpressionParser : public ParseCursor {
 protected:
  using ParseCursor::ParseCursor;

  // parse_tuple: expressions separated by commas up to the end of the tag,
  // a ")" or a name in `extra_end`; one without a comma is itself. With
  // `explicit_parens` (inside "(...)") an empty tuple is allowed.
  absl::StatusOr<ExprPtr> ParseTuple(
      bool simplified, bool with_condexpr,
      std::initializer_list<std::string_view> extra_end, bool explicit_parens);
  absl::StatusOr<ExprPtr> ParseExpression(bool with_condexpr);
  // One filter after its "|" (`subject` may be null: a set block's).
  absl::StatusOr<ExprPtr> ParseFilter(ExprPtr subject);

 private:
  bool IsTupleEnd(std::initializer_list<std::string_view> extra_end) const;
  absl::StatusOr<ExprPtr> ParseCondExpr();
  absl::StatusOr<ExprPtr> ParseOr();
  absl::StatusOr<ExprPtr> ParseAnd();
  absl::StatusOr<ExprPtr> ParseNot();
  absl::StatusOr<ExprPtr> ParseCompare();
  absl::StatusOr<ExprPtr> Binary(const std::string& op, ExprPtr left,
                                 ExprPtr right, int line);
  absl::StatusOr<ExprPtr> ParseMath1();   // + -
  absl::StatusOr<ExprPtr> ParseConcat();  // ~
  absl::StatusOr<ExprPtr> ParseMath2();   // * / // %
  absl::StatusOr<ExprPtr> ParsePow();
  absl::StatusOr<ExprPtr> ParseUnary(bool with_filter);
  absl::StatusOr<ExprPtr> ParsePrimary();
  absl::StatusOr<ExprPtr> ParseList();
  absl::StatusOr<ExprPtr> ParseDict();
  // Attributes, subscripts and calls after a primary.
  absl::StatusOr<ExprPtr> ParsePostfix(ExprPtr node);
  // Filters, tests and calls after a unary expression.
  absl::StatusOr<ExprPtr> ParseFilterExpr(ExprPtr node);
  absl::StatusOr<ExprPtr> ParseSubscript(ExprPtr node);
  // One subscript: an expression or a slice.
  absl::StatusOr<ExprPtr> ParseSubscribed();
  // "(" args ")" into node->args (after what is there) and node->kwargs.
  absl::Status ParseCallArgs(Expr* node);
  absl::StatusOr<ExprPtr> ParseCall(ExprPtr callee);
  absl::StatusOr<std::string> DottedName();
  absl::StatusOr<ExprPtr> ParseTest(ExprPtr subject);
};

}  // namespace seqboat::jinja

#endif  // SEQBOAT_SERVER_JINJA_EXPRESSION_PARSER_H_
