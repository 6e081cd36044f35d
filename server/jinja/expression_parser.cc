#include "server/jinja/expression_parser.h"

#include <memory>
#include <utility>

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"

namespace seqboat::jinja {

bool ExpressionParser::IsTupleEnd(
    std::initializer_list<std::string_view> extra_end) const {
  const Token& t = Cur();
  if (t.type == TokenType::kVariableEnd || t.type == TokenType::kBlockEnd ||
      IsOp(t, ")")) {
    return true;
  }
  for (std::string_view name : extra_end) {
    if (IsName(t, name)) return true;
  }
  return false;
}

absl::StatusOr<ExprPtr> ExpressionParser::ParseTuple(
    bool simplified, bool with_condexpr,
    std::initializer_list<std::string_view> extra_end, bool explicit_parens) {
  const int line = Cur().line;
  std::vector<ExprPtr> items;
  bool is_tuple = false;
  while (true) {
    if (!items.empty()) RETURN_IF_ERROR(ExpectOp(","));
    if (IsTupleEnd(extra_end)) break;
    ExprPtr item;
    if (simplified) {
      ASSIGN_OR_RETURN(item, ParsePrimary());
    } else {
      ASSIGN_OR_RETURN(item, ParseExpression(with_condexpr));
    }
    items.push_back(std::move(item));
    if (IsOp(Cur(), ",")) {
      is_tuple = true;
    } else {
      break;
    }
  }
  if (!is_tuple) {
    if (!items.empty()) return std::move(items[0]);
    if (!explicit_parens) {
      return Fail(
          line, absl::StrCat("Expected an expression, got ", Describe(Cur())));
    }
  }
  ExprPtr tuple = Node(Expr::Type::kTuple, line);
  tuple->args = std::move(items);
  RETURN_IF_ERROR(Seal(tuple.get()));
  return tuple;
}

absl::StatusOr<ExprPtr> ExpressionParser::ParseExpression(bool with_condexpr) {
  Nest nest(this);
  if (nest.too_deep()) return TooDeep();
  if (with_condexpr) return ParseCondExpr();
  return ParseOr();
}

absl::StatusOr<ExprPtr> ExpressionParser::ParseCondExpr() {
  int line = Cur().line;
  ASSIGN_OR_RETURN(ExprPtr expr1, ParseOr());
  while (IsName(Cur(), "if")) {
    Next();
    ASSIGN_OR_RETURN(ExprPtr cond, ParseOr());
    ExprPtr expr3;
    if (IsName(Cur(), "else")) {
      Next();
      Nest nest(this);
      if (nest.too_deep()) return TooDeep();
      ASSIGN_OR_RETURN(expr3, ParseCondExpr());
    }
    ExprPtr node = Node(Expr::Type::kCondExpr, line);
    node->args.push_back(std::move(expr1));
    node->args.push_back(std::move(cond));
    node->args.push_back(std::move(expr3));
    RETURN_IF_ERROR(Seal(node.get()));
    expr1 = std::move(node);
    line = Cur().line;
  }
  return expr1;
}

absl::StatusOr<ExprPtr> ExpressionParser::ParseOr() {
  const int line = Cur().line;
  ASSIGN_OR_RETURN(ExprPtr left, ParseAnd());
  while (IsName(Cur(), "or")) {
    Next();
    ASSIGN_OR_RETURN(ExprPtr right, ParseAnd());
    ExprPtr node = Node(Expr::Type::kOr, line);
    node->args.push_back(std::move(left));
    node->args.push_back(std::move(right));
    RETURN_IF_ERROR(Seal(node.get()));
    left = std::move(node);
  }
  return left;
}

absl::StatusOr<ExprPtr> ExpressionParser::ParseAnd() {
  const int line = Cur().line;
  ASSIGN_OR_RETURN(ExprPtr left, ParseNot());
  while (IsName(Cur(), "and")) {
    Next();
    ASSIGN_OR_RETURN(ExprPtr right, ParseNot());
    ExprPtr node = Node(Expr::Type::kAnd, line);
    node->args.push_back(std::move(left));
    node->args.push_back(std::move(right));
    RETURN_IF_ERROR(Seal(node.get()));
    left = std::move(node);
  }
  return left;
}

absl::StatusOr<ExprPtr> ExpressionParser::ParseNot() {
  if (IsName(Cur(), "not")) {
    Nest nest(this);
    if (nest.too_deep()) return TooDeep();
    ExprPtr node = Node(Expr::Type::kNot, Cur().line);
    Next();
    ASSIGN_OR_RETURN(ExprPtr operand, ParseNot());
    node->args.push_back(std::move(operand));
    RETURN_IF_ERROR(Seal(node.get()));
    return node;
  }
  return ParseCompare();
}

absl::StatusOr<ExprPtr> ExpressionParser::ParseCompare() {
  const int line = Cur().line;
  ASSIGN_OR_RETURN(ExprPtr expr, ParseMath1());
  std::vector<std::string> ops;
  std::vector<ExprPtr> operands;
  while (true) {
    const Token& t = Cur();
    std::string op;
    if (t.type == TokenType::kOperator &&
        (t.text == "==" || t.text == "!=" || t.text == "<" || t.text == "<=" ||
         t.text == ">" || t.text == ">=")) {
      op = t.text;
      Next();
    } else if (IsName(t, "in")) {
      op = "in";
      Next();
    } else if (IsName(t, "not") && IsName(Look(), "in")) {
      op = "notin";
      Next();
      Next();
    } else {
      break;
    }
    ASSIGN_OR_RETURN(ExprPtr operand, ParseMath1());
    ops.push_back(std::move(op));
    operands.push_back(std::move(operand));
  }
  if (ops.empty()) return expr;
  ExprPtr node = Node(Expr::Type::kCompare, line);
  node->args.push_back(std::move(expr));
  for (ExprPtr& operand : operands) node->args.push_back(std::move(operand));
  node->ops = std::move(ops);
  RETURN_IF_ERROR(Seal(node.get()));
  return node;
}

absl::StatusOr<ExprPtr> ExpressionParser::Binary(const std::string& op,
                                                 ExprPtr left, ExprPtr right,
                                                 int line) {
  ExprPtr node = Node(Expr::Type::kBinary, line);
  node->name = op;
  node->args.push_back(std::move(left));
  node->args.push_back(std::move(right));
  RETURN_IF_ERROR(Seal(node.get()));
  return node;
}

absl::StatusOr<ExprPtr> ExpressionParser::ParseMath1() {
  const int line = Cur().line;
  ASSIGN_OR_RETURN(ExprPtr left, ParseConcat());
  while (IsOp(Cur(), "+") || IsOp(Cur(), "-")) {
    const std::string op = Cur().text;
    Next();
    ASSIGN_OR_RETURN(ExprPtr right, ParseConcat());
    ASSIGN_OR_RETURN(left, Binary(op, std::move(left), std::move(right), line));
  }
  return left;
}

absl::StatusOr<ExprPtr> ExpressionParser::ParseConcat() {
  const int line = Cur().line;
  ASSIGN_OR_RETURN(ExprPtr first, ParseMath2());
  if (!IsOp(Cur(), "~")) return first;
  ExprPtr node = Node(Expr::Type::kConcat, line);
  node->args.push_back(std::move(first));
  while (IsOp(Cur(), "~")) {
    Next();
    ASSIGN_OR_RETURN(ExprPtr next, ParseMath2());
    node->args.push_back(std::move(next));
  }
  RETURN_IF_ERROR(Seal(node.get()));
  return node;
}

absl::StatusOr<ExprPtr> ExpressionParser::ParseMath2() {
  const int line = Cur().line;
  ASSIGN_OR_RETURN(ExprPtr left, ParsePow());
  while (IsOp(Cur(), "*") || IsOp(Cur(), "/") || IsOp(Cur(), "//") ||
         IsOp(Cur(), "%")) {
    const std::string op = Cur().text;
    Next();
    ASSIGN_OR_RETURN(ExprPtr right, ParsePow());
    ASSIGN_OR_RETURN(left, Binary(op, std::move(left), std::move(right), line));
  }
  return left;
}

absl::StatusOr<ExprPtr> ExpressionParser::ParsePow() {
  const int line = Cur().line;
  ASSIGN_OR_RETURN(ExprPtr left, ParseUnary(true));
  while (IsOp(Cur(), "**")) {
    Next();
    ASSIGN_OR_RETURN(ExprPtr right, ParseUnary(true));
    ASSIGN_OR_RETURN(left,
                     Binary("**", std::move(left), std::move(right), line));
  }
  return left;
}

absl::StatusOr<ExprPtr> ExpressionParser::ParseUnary(bool with_filter) {
  Nest nest(this);
  if (nest.too_deep()) return TooDeep();
  const int line = Cur().line;
  ExprPtr node;
  if (IsOp(Cur(), "-") || IsOp(Cur(), "+")) {
    node = Node(IsOp(Cur(), "-") ? Expr::Type::kNeg : Expr::Type::kPos, line);
    Next();
    ASSIGN_OR_RETURN(ExprPtr operand, ParseUnary(false));
    node->args.push_back(std::move(operand));
    RETURN_IF_ERROR(Seal(node.get()));
  } else {
    ASSIGN_OR_RETURN(node, ParsePrimary());
  }
  ASSIGN_OR_RETURN(node, ParsePostfix(std::move(node)));
  if (with_filter) {
    ASSIGN_OR_RETURN(node, ParseFilterExpr(std::move(node)));
  }
  return node;
}

absl::StatusOr<ExprPtr> ExpressionParser::ParsePrimary() {
  const Token& t = Cur();
  const int line = t.line;
  switch (t.type) {
    case TokenType::kName: {
      ExprPtr node;
      if (t.text == "true" || t.text == "True" || t.text == "false" ||
          t.text == "False") {
        node = Node(Expr::Type::kConst, line);
        node->value = Value::Bool(t.text == "true" || t.text == "True");
      } else if (t.text == "none" || t.text == "None") {
        node = Node(Expr::Type::kConst, line);
        node->value = Value::None();
      } else {
        node = Node(Expr::Type::kName, line);
        node->name = t.text;
      }
      Next();
      return node;
    }
    case TokenType::kString: {
      std::string text = t.text;
      Next();
      while (Cur().type == TokenType::kString) {
        text += Cur().text;
        Next();
      }
      ExprPtr node = Node(Expr::Type::kConst, line);
      node->value = Value::String(std::move(text));
      return node;
    }
    case TokenType::kInteger: {
      ExprPtr node = Node(Expr::Type::kConst, line);
      node->value = Value::Int(t.integer);
      Next();
      return node;
    }
    case TokenType::kFloat: {
      ExprPtr node = Node(Expr::Type::kConst, line);
      node->value = Value::Float(t.number);
      Next();
      return node;
    }
    case TokenType::kOperator:
      if (t.text == "(") {
        Next();
        ASSIGN_OR_RETURN(ExprPtr node, ParseTuple(false, true, {}, true));
        RETURN_IF_ERROR(ExpectOp(")"));
        return node;
      }
      if (t.text == "[") return ParseList();
      if (t.text == "{") return ParseDict();
      break;
    default:
      break;
  }
  return Fail(line, absl::StrCat("unexpected ", Describe(t)));
}

absl::StatusOr<ExprPtr> ExpressionParser::ParseList() {
  ExprPtr node = Node(Expr::Type::kList, Cur().line);
  Next();  // [
  while (!IsOp(Cur(), "]")) {
    if (!node->args.empty()) RETURN_IF_ERROR(ExpectOp(","));
    if (IsOp(Cur(), "]")) break;
    ASSIGN_OR_RETURN(ExprPtr item, ParseExpression(true));
    node->args.push_back(std::move(item));
  }
  Next();  // ]
  RETURN_IF_ERROR(Seal(node.get()));
  return node;
}

absl::StatusOr<ExprPtr> ExpressionParser::ParseDict() {
  ExprPtr node = Node(Expr::Type::kDict, Cur().line);
  Next();  // {
  while (!IsOp(Cur(), "}")) {
    if (!node->args.empty()) RETURN_IF_ERROR(ExpectOp(","));
    if (IsOp(Cur(), "}")) break;
    ASSIGN_OR_RETURN(ExprPtr key, ParseExpression(true));
    RETURN_IF_ERROR(ExpectOp(":"));
    ASSIGN_OR_RETURN(ExprPtr value, ParseExpression(true));
    node->args.push_back(std::move(key));
    node->args.push_back(std::move(value));
  }
  Next();  // }
  RETURN_IF_ERROR(Seal(node.get()));
  return node;
}

absl::StatusOr<ExprPtr> ExpressionParser::ParsePostfix(ExprPtr node) {
  while (true) {
    if (IsOp(Cur(), ".") || IsOp(Cur(), "[")) {
      ASSIGN_OR_RETURN(node, ParseSubscript(std::move(node)));
    } else if (IsOp(Cur(), "(")) {
      ASSIGN_OR_RETURN(node, ParseCall(std::move(node)));
    } else {
      return node;
    }
  }
}

absl::StatusOr<ExprPtr> ExpressionParser::ParseFilterExpr(ExprPtr node) {
  while (true) {
    if (IsOp(Cur(), "|")) {
      Next();
      ASSIGN_OR_RETURN(node, ParseFilter(std::move(node)));
    } else if (IsName(Cur(), "is")) {
      ASSIGN_OR_RETURN(node, ParseTest(std::move(node)));
    } else if (IsOp(Cur(), "(")) {
      ASSIGN_OR_RETURN(node, ParseCall(std::move(node)));
    } else {
      return node;
    }
  }
}

absl::StatusOr<ExprPtr> ExpressionParser::ParseSubscript(ExprPtr node) {
  const Token& t = Cur();
  const int line = t.line;
  if (IsOp(t, ".")) {
    Next();
    const Token& attr = Cur();
    if (attr.type == TokenType::kName) {
      ExprPtr get = Node(Expr::Type::kGetattr, line);
      get->name = attr.text;
      get->args.push_back(std::move(node));
      Next();
      RETURN_IF_ERROR(Seal(get.get()));
      return get;
    }
    if (attr.type != TokenType::kInteger) {
      return Fail(attr.line, "expected name or number");
    }
    ExprPtr index = Node(Expr::Type::kConst, attr.line);
    index->value = Value::Int(attr.integer);
    Next();
    ExprPtr get = Node(Expr::Type::kGetitem, line);
    get->args.push_back(std::move(node));
    get->args.push_back(std::move(index));
    RETURN_IF_ERROR(Seal(get.get()));
    return get;
  }
  Next();  // [
  std::vector<ExprPtr> args;
  while (!IsOp(Cur(), "]")) {
    if (!args.empty()) RETURN_IF_ERROR(ExpectOp(","));
    ASSIGN_OR_RETURN(ExprPtr arg, ParseSubscribed());
    args.push_back(std::move(arg));
  }
  Next();  // ]
  if (args.empty()) return Fail(line, "expected subscript expression");
  ExprPtr get = Node(Expr::Type::kGetitem, line);
  get->args.push_back(std::move(node));
  if (args.size() == 1) {
    get->args.push_back(std::move(args[0]));
  } else {
    ExprPtr tuple = Node(Expr::Type::kTuple, line);
    tuple->args = std::move(args);
    RETURN_IF_ERROR(Seal(tuple.get()));
    get->args.push_back(std::move(tuple));
  }
  RETURN_IF_ERROR(Seal(get.get()));
  return get;
}

absl::StatusOr<ExprPtr> ExpressionParser::ParseSubscribed() {
  const int line = Cur().line;
  std::vector<ExprPtr> args;
  if (IsOp(Cur(), ":")) {
    Next();
    args.push_back(nullptr);
  } else {
    ASSIGN_OR_RETURN(ExprPtr node, ParseExpression(true));
    if (!IsOp(Cur(), ":")) return node;
    Next();
    args.push_back(std::move(node));
  }
  if (IsOp(Cur(), ":")) {
    args.push_back(nullptr);
  } else if (!IsOp(Cur(), "]") && !IsOp(Cur(), ",")) {
    ASSIGN_OR_RETURN(ExprPtr stop, ParseExpression(true));
    args.push_back(std::move(stop));
  } else {
    args.push_back(nullptr);
  }
  if (IsOp(Cur(), ":")) {
    Next();
    if (!IsOp(Cur(), "]") && !IsOp(Cur(), ",")) {
      ASSIGN_OR_RETURN(ExprPtr step, ParseExpression(true));
      args.push_back(std::move(step));
    } else {
      args.push_back(nullptr);
    }
  } else {
    args.push_back(nullptr);
  }
  ExprPtr slice = Node(Expr::Type::kSlice, line);
  slice->args = std::move(args);
  RETURN_IF_ERROR(Seal(slice.get()));
  return slice;
}

absl::Status ExpressionParser::ParseCallArgs(Expr* node) {
  const int line = Cur().line;
  RETURN_IF_ERROR(ExpectOp("("));
  bool require_comma = false;
  while (!IsOp(Cur(), ")")) {
    if (require_comma) {
      RETURN_IF_ERROR(ExpectOp(","));
      if (IsOp(Cur(), ")")) break;
    }
    if (IsOp(Cur(), "*") || IsOp(Cur(), "**")) {
      return Fail(Cur().line, "*args and **kwargs are not supported");
    }
    if (Cur().type == TokenType::kName && IsOp(Look(), "=")) {
      std::string key = Cur().text;
      Next();
      Next();
      ASSIGN_OR_RETURN(ExprPtr value, ParseExpression(true));
      node->kwargs.emplace_back(std::move(key), std::move(value));
    } else {
      if (!node->kwargs.empty()) {
        return Fail(line, "invalid syntax for function call expression");
      }
      ASSIGN_OR_RETURN(ExprPtr value, ParseExpression(true));
      node->args.push_back(std::move(value));
    }
    require_comma = true;
  }
  Next();  // )
  return absl::OkStatus();
}

absl::StatusOr<ExprPtr> ExpressionParser::ParseCall(ExprPtr callee) {
  ExprPtr node = Node(Expr::Type::kCall, Cur().line);
  node->args.push_back(std::move(callee));
  RETURN_IF_ERROR(ParseCallArgs(node.get()));
  RETURN_IF_ERROR(Seal(node.get()));
  return node;
}

absl::StatusOr<std::string> ExpressionParser::DottedName() {
  ASSIGN_OR_RETURN(std::string name, ExpectName());
  while (IsOp(Cur(), ".")) {
    Next();
    ASSIGN_OR_RETURN(std::string part, ExpectName());
    absl::StrAppend(&name, ".", part);
  }
  return name;
}

absl::StatusOr<ExprPtr> ExpressionParser::ParseFilter(ExprPtr subject) {
  ExprPtr node = Node(Expr::Type::kFilter, Cur().line);
  ASSIGN_OR_RETURN(node->name, DottedName());
  node->args.push_back(std::move(subject));
  if (IsOp(Cur(), "(")) RETURN_IF_ERROR(ParseCallArgs(node.get()));
  RETURN_IF_ERROR(Seal(node.get()));
  return node;
}

absl::StatusOr<ExprPtr> ExpressionParser::ParseTest(ExprPtr subject) {
  const int line = Cur().line;
  Next();  // is
  bool negated = false;
  if (IsName(Cur(), "not")) {
    Next();
    negated = true;
  }
  ExprPtr node = Node(Expr::Type::kTest, line);
  ASSIGN_OR_RETURN(node->name, DottedName());
  node->args.push_back(std::move(subject));
  const Token& t = Cur();
  if (IsOp(t, "(")) {
    RETURN_IF_ERROR(ParseCallArgs(node.get()));
  } else if ((t.type == TokenType::kName || t.type == TokenType::kString ||
              t.type == TokenType::kInteger || t.type == TokenType::kFloat ||
              IsOp(t, "[") || IsOp(t, "{")) &&
             !IsName(t, "else") && !IsName(t, "or") && !IsName(t, "and")) {
    if (IsName(t, "is")) {
      return Fail(t.line, "You cannot chain multiple tests with is");
    }
    ASSIGN_OR_RETURN(ExprPtr arg, ParsePrimary());
    ASSIGN_OR_RETURN(arg, ParsePostfix(std::move(arg)));
    node->args.push_back(std::move(arg));
  }
  RETURN_IF_ERROR(Seal(node.get()));
  if (!negated) return node;
  ExprPtr not_node = Node(Expr::Type::kNot, line);
  not_node->args.push_back(std::move(node));
  RETURN_IF_ERROR(Seal(not_node.get()));
  return not_node;
}

}  // namespace seqboat::jinja
