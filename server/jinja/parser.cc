#include "server/jinja/parser.h"

#include <algorithm>
#include <initializer_list>
#include <string>
#include <string_view>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "base/status_macros.h"

namespace seqboat::jinja {
namespace {

// Tags Jinja has that this renderer does not.
constexpr std::string_view kUnsupportedTags[] = {
    "block",  "extends", "include",    "import", "from",  "with",
    "filter", "call",    "autoescape", "do",     "trans", "pluralize"};

class Parser {
 public:
  Parser(std::vector<Token> tokens, int max_nesting)
      : tokens_(std::move(tokens)), max_nesting_(max_nesting) {}

  absl::StatusOr<Body> Run() {
    std::string end;
    ASSIGN_OR_RETURN(Body body, Subparse({}, &end));
    return body;
  }

 private:
  // Counts one level of nesting for as long as it lives.
  class Nest {
   public:
    explicit Nest(Parser* p) : p_(p) { ++p_->depth_; }
    ~Nest() { --p_->depth_; }
    bool too_deep() const { return p_->depth_ > p_->max_nesting_; }

   private:
    Parser* p_;
  };

  const Token& Cur() const { return tokens_[pos_]; }
  const Token& Look() const {
    return tokens_[pos_ + 1 < tokens_.size() ? pos_ + 1 : pos_];
  }
  void Next() {
    if (pos_ + 1 < tokens_.size()) ++pos_;
  }

  static bool IsName(const Token& t, std::string_view name) {
    return t.type == TokenType::kName && t.text == name;
  }
  static bool IsOp(const Token& t, std::string_view op) {
    return t.type == TokenType::kOperator && t.text == op;
  }

  absl::Status Fail(int line, const std::string& message) const {
    return absl::InvalidArgumentError(
        absl::StrCat("line ", line, ": ", message));
  }
  absl::Status TooDeep() const {
    return Fail(Cur().line, absl::StrCat("the template nests more than ",
                                         max_nesting_, " levels"));
  }
  absl::Status Expected(const std::string& what) const {
    return Fail(Cur().line,
                absl::StrCat("expected ", what, ", got ", Describe(Cur())));
  }
  absl::Status ExpectOp(std::string_view op) {
    if (!IsOp(Cur(), op))
      return Expected(absl::StrCat("'", std::string(op), "'"));
    Next();
    return absl::OkStatus();
  }
  absl::Status ExpectType(TokenType type, const char* what) {
    if (Cur().type != type) return Expected(what);
    Next();
    return absl::OkStatus();
  }
  absl::Status ExpectBlockEnd() {
    return ExpectType(TokenType::kBlockEnd, "'end of statement block'");
  }
  absl::StatusOr<std::string> ExpectName() {
    if (Cur().type != TokenType::kName) return Expected("a name");
    std::string name = Cur().text;
    Next();
    return name;
  }

  // Records the depth of a node whose operands are complete; operator and
  // filter chains nest without brackets, so this bounds them too.
  absl::Status Seal(Expr* e) const {
    int depth = 0;
    for (const ExprPtr& arg : e->args) {
      if (arg != nullptr) depth = std::max(depth, arg->depth);
    }
    for (const auto& [name, arg] : e->kwargs)
      depth = std::max(depth, arg->depth);
    e->depth = depth + 1;
    if (e->depth > 2 * max_nesting_) {
      return Fail(e->line, absl::StrCat("an expression nests more than ",
                                        2 * max_nesting_, " operations"));
    }
    return absl::OkStatus();
  }

  static ExprPtr Node(Expr::Type type, int line) {
    auto e = std::make_unique<Expr>();
    e->type = type;
    e->line = line;
    return e;
  }

  // Statements up to a block whose first name is one of `ends` (left
  // current, with *end set to it), or the end of the template when `ends`
  // is empty.
  absl::StatusOr<Body> Subparse(std::initializer_list<std::string_view> ends,
                                std::string* end) {
    Nest nest(this);
    if (nest.too_deep()) return TooDeep();
    Body body;
    while (true) {
      const Token& t = Cur();
      switch (t.type) {
        case TokenType::kData: {
          auto s = std::make_unique<Stmt>();
          s->type = Stmt::Type::kData;
          s->line = t.line;
          s->text = t.text;
          body.push_back(std::move(s));
          Next();
          break;
        }
        case TokenType::kVariableBegin: {
          const int line = t.line;
          Next();
          auto s = std::make_unique<Stmt>();
          s->type = Stmt::Type::kOutput;
          s->line = line;
          ASSIGN_OR_RETURN(s->expr, ParseTuple(/*simplified=*/false,
                                               /*with_condexpr=*/true, {},
                                               /*explicit_parens=*/false));
          RETURN_IF_ERROR(
              ExpectType(TokenType::kVariableEnd, "'end of print statement'"));
          body.push_back(std::move(s));
          break;
        }
        case TokenType::kBlockBegin: {
          Next();
          for (std::string_view name : ends) {
            if (IsName(Cur(), name)) {
              *end = Cur().text;
              return body;
            }
          }
          ASSIGN_OR_RETURN(std::unique_ptr<Stmt> s, ParseStatement());
          body.push_back(std::move(s));
          RETURN_IF_ERROR(ExpectBlockEnd());
          break;
        }
        case TokenType::kEof: {
          if (ends.size() == 0) return body;
          std::vector<std::string> names;
          for (std::string_view name : ends) {
            names.push_back(absl::StrCat("'", std::string(name), "'"));
          }
          return Fail(t.line,
                      absl::StrCat("unexpected end of template; expected ",
                                   absl::StrJoin(names, " or ")));
        }
        default:
          return Fail(t.line, absl::StrCat("unexpected ", Describe(t)));
      }
    }
  }

  // parse_statements: the header's block end, then the body up to one of
  // `ends` (consumed when `drop_end`).
  absl::StatusOr<Body> Statements(std::initializer_list<std::string_view> ends,
                                  std::string* end, bool drop_end) {
    if (IsOp(Cur(), ":")) Next();
    RETURN_IF_ERROR(ExpectBlockEnd());
    ASSIGN_OR_RETURN(Body body, Subparse(ends, end));
    if (drop_end) Next();
    return body;
  }

  absl::StatusOr<std::unique_ptr<Stmt>> ParseStatement() {
    const Token& t = Cur();
    if (t.type != TokenType::kName) {
      return Fail(t.line, "tag name expected");
    }
    const std::string tag = t.text;
    const int line = t.line;
    auto s = std::make_unique<Stmt>();
    s->line = line;
    if (tag == "if") return ParseIf();
    if (tag == "for") return ParseFor();
    if (tag == "set") return ParseSet();
    if (tag == "macro") return ParseMacro();
    if (tag == "print") {
      Next();
      s->type = Stmt::Type::kOutput;
      ASSIGN_OR_RETURN(s->expr, ParseTuple(false, true, {}, false));
      return s;
    }
    if (tag == "break" || tag == "continue") {
      if (loops_ == 0) {
        return Fail(line, absl::StrCat("'", tag, "' outside of a loop"));
      }
      Next();
      s->type = tag == "break" ? Stmt::Type::kBreak : Stmt::Type::kContinue;
      return s;
    }
    if (tag == "generation") {
      Next();
      s->type = Stmt::Type::kBody;
      std::string end;
      ASSIGN_OR_RETURN(s->body, Statements({"endgeneration"}, &end, true));
      return s;
    }
    for (std::string_view unsupported : kUnsupportedTags) {
      if (tag == unsupported) {
        return Fail(line, absl::StrCat("the tag '", tag,
                                       "' is not supported in chat templates"));
      }
    }
    return Fail(line, absl::StrCat("Encountered unknown tag '", tag, "'"));
  }

  absl::StatusOr<std::unique_ptr<Stmt>> ParseIf() {
    auto s = std::make_unique<Stmt>();
    s->type = Stmt::Type::kIf;
    s->line = Cur().line;
    Next();  // if
    while (true) {
      ASSIGN_OR_RETURN(ExprPtr test, ParseTuple(false, false, {}, false));
      std::string end;
      ASSIGN_OR_RETURN(Body body,
                       Statements({"elif", "else", "endif"}, &end, false));
      s->branches.emplace_back(std::move(test), std::move(body));
      Next();  // the end tag
      if (end == "elif") continue;
      if (end == "else") {
        ASSIGN_OR_RETURN(s->else_body, Statements({"endif"}, &end, true));
      }
      return s;
    }
  }

  // parse_assign_target: names, unpacked names, or (set only) ns.attr.
  absl::StatusOr<Target> ParseTarget(bool with_namespace,
                                     std::string_view extra_end) {
    Target target;
    if (with_namespace && Cur().type == TokenType::kName && IsOp(Look(), ".")) {
      target.names.push_back(Cur().text);
      Next();
      Next();
      ASSIGN_OR_RETURN(target.ns_attr, ExpectName());
      return target;
    }
    const bool parens = IsOp(Cur(), "(");
    if (parens) {
      Next();
      target.unpack = true;
    }
    while (true) {
      if (!target.names.empty()) {
        if (!IsOp(Cur(), ",")) break;
        Next();
        target.unpack = true;
        if (IsName(Cur(), extra_end) || IsOp(Cur(), "=") || IsOp(Cur(), ")") ||
            Cur().type == TokenType::kBlockEnd) {
          break;
        }
      }
      const Token& t = Cur();
      if (t.type != TokenType::kName) return Expected("a name to assign to");
      static constexpr std::string_view kConstants[] = {
          "true", "false", "none", "True", "False", "None"};
      for (std::string_view c : kConstants) {
        if (t.text == c) {
          return Fail(t.line,
                      absl::StrCat("can't assign to '", std::string(c), "'"));
        }
      }
      target.names.push_back(t.text);
      Next();
    }
    if (parens) RETURN_IF_ERROR(ExpectOp(")"));
    return target;
  }

  absl::StatusOr<std::unique_ptr<Stmt>> ParseFor() {
    auto s = std::make_unique<Stmt>();
    s->type = Stmt::Type::kFor;
    s->line = Cur().line;
    Next();  // for
    ASSIGN_OR_RETURN(s->target, ParseTarget(false, "in"));
    if (!IsName(Cur(), "in")) return Expected("'in'");
    Next();
    ASSIGN_OR_RETURN(s->expr, ParseTuple(false, false, {"recursive"}, false));
    if (IsName(Cur(), "if")) {
      Next();
      ASSIGN_OR_RETURN(s->filter, ParseExpression(true));
    }
    if (IsName(Cur(), "recursive")) {
      return Fail(Cur().line, "recursive loops are not supported");
    }
    std::string end;
    ++loops_;
    absl::StatusOr<Body> body = Statements({"endfor", "else"}, &end, false);
    --loops_;
    if (!body.ok()) return body.status();
    s->body = *std::move(body);
    Next();
    if (end == "else") {
      ASSIGN_OR_RETURN(s->else_body, Statements({"endfor"}, &end, true));
    }
    return s;
  }

  absl::StatusOr<std::unique_ptr<Stmt>> ParseSet() {
    auto s = std::make_unique<Stmt>();
    s->line = Cur().line;
    Next();  // set
    ASSIGN_OR_RETURN(s->target, ParseTarget(true, ""));
    if (IsOp(Cur(), "=")) {
      Next();
      s->type = Stmt::Type::kSet;
      ASSIGN_OR_RETURN(s->expr, ParseTuple(false, true, {}, false));
      return s;
    }
    s->type = Stmt::Type::kSetBlock;
    while (IsOp(Cur(), "|")) {
      Next();
      ASSIGN_OR_RETURN(ExprPtr filter, ParseFilter(nullptr));
      s->filters.push_back(std::move(filter));
    }
    std::string end;
    ASSIGN_OR_RETURN(s->body, Statements({"endset"}, &end, true));
    return s;
  }

  absl::StatusOr<std::unique_ptr<Stmt>> ParseMacro() {
    auto s = std::make_unique<Stmt>();
    s->type = Stmt::Type::kMacro;
    s->line = Cur().line;
    Next();  // macro
    ASSIGN_OR_RETURN(s->name, ExpectName());
    RETURN_IF_ERROR(ExpectOp("("));
    bool defaults = false;
    while (!IsOp(Cur(), ")")) {
      if (!s->params.empty()) RETURN_IF_ERROR(ExpectOp(","));
      ASSIGN_OR_RETURN(std::string name, ExpectName());
      ExprPtr value;
      if (IsOp(Cur(), "=")) {
        Next();
        ASSIGN_OR_RETURN(value, ParseExpression(true));
        defaults = true;
      } else if (defaults) {
        return Fail(Cur().line,
                    "non-default argument follows default argument");
      }
      s->params.emplace_back(std::move(name), std::move(value));
    }
    Next();  // )
    std::string end;
    const int loops = loops_;
    loops_ = 0;  // a loop around the definition is not the macro's
    absl::StatusOr<Body> body = Statements({"endmacro"}, &end, true);
    loops_ = loops;
    if (!body.ok()) return body.status();
    s->body = *std::move(body);
    return s;
  }

  bool IsTupleEnd(std::initializer_list<std::string_view> extra_end) const {
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

  absl::StatusOr<ExprPtr> ParseTuple(
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
        return Fail(line, absl::StrCat("Expected an expression, got ",
                                       Describe(Cur())));
      }
    }
    ExprPtr tuple = Node(Expr::Type::kTuple, line);
    tuple->args = std::move(items);
    RETURN_IF_ERROR(Seal(tuple.get()));
    return tuple;
  }

  absl::StatusOr<ExprPtr> ParseExpression(bool with_condexpr) {
    Nest nest(this);
    if (nest.too_deep()) return TooDeep();
    if (with_condexpr) return ParseCondExpr();
    return ParseOr();
  }

  absl::StatusOr<ExprPtr> ParseCondExpr() {
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

  absl::StatusOr<ExprPtr> ParseOr() {
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

  absl::StatusOr<ExprPtr> ParseAnd() {
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

  absl::StatusOr<ExprPtr> ParseNot() {
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

  absl::StatusOr<ExprPtr> ParseCompare() {
    const int line = Cur().line;
    ASSIGN_OR_RETURN(ExprPtr expr, ParseMath1());
    std::vector<std::string> ops;
    std::vector<ExprPtr> operands;
    while (true) {
      const Token& t = Cur();
      std::string op;
      if (t.type == TokenType::kOperator &&
          (t.text == "==" || t.text == "!=" || t.text == "<" ||
           t.text == "<=" || t.text == ">" || t.text == ">=")) {
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

  absl::StatusOr<ExprPtr> Binary(const std::string& op, ExprPtr left,
                                 ExprPtr right, int line) {
    ExprPtr node = Node(Expr::Type::kBinary, line);
    node->name = op;
    node->args.push_back(std::move(left));
    node->args.push_back(std::move(right));
    RETURN_IF_ERROR(Seal(node.get()));
    return node;
  }

  absl::StatusOr<ExprPtr> ParseMath1() {
    const int line = Cur().line;
    ASSIGN_OR_RETURN(ExprPtr left, ParseConcat());
    while (IsOp(Cur(), "+") || IsOp(Cur(), "-")) {
      const std::string op = Cur().text;
      Next();
      ASSIGN_OR_RETURN(ExprPtr right, ParseConcat());
      ASSIGN_OR_RETURN(left,
                       Binary(op, std::move(left), std::move(right), line));
    }
    return left;
  }

  absl::StatusOr<ExprPtr> ParseConcat() {
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

  absl::StatusOr<ExprPtr> ParseMath2() {
    const int line = Cur().line;
    ASSIGN_OR_RETURN(ExprPtr left, ParsePow());
    while (IsOp(Cur(), "*") || IsOp(Cur(), "/") || IsOp(Cur(), "//") ||
           IsOp(Cur(), "%")) {
      const std::string op = Cur().text;
      Next();
      ASSIGN_OR_RETURN(ExprPtr right, ParsePow());
      ASSIGN_OR_RETURN(left,
                       Binary(op, std::move(left), std::move(right), line));
    }
    return left;
  }

  absl::StatusOr<ExprPtr> ParsePow() {
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

  absl::StatusOr<ExprPtr> ParseUnary(bool with_filter) {
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

  absl::StatusOr<ExprPtr> ParsePrimary() {
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

  absl::StatusOr<ExprPtr> ParseList() {
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

  absl::StatusOr<ExprPtr> ParseDict() {
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

  absl::StatusOr<ExprPtr> ParsePostfix(ExprPtr node) {
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

  absl::StatusOr<ExprPtr> ParseFilterExpr(ExprPtr node) {
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

  absl::StatusOr<ExprPtr> ParseSubscript(ExprPtr node) {
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

  absl::StatusOr<ExprPtr> ParseSubscribed() {
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

  // "(" args ")" into node->args (after what is there) and node->kwargs.
  absl::Status ParseCallArgs(Expr* node) {
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

  absl::StatusOr<ExprPtr> ParseCall(ExprPtr callee) {
    ExprPtr node = Node(Expr::Type::kCall, Cur().line);
    node->args.push_back(std::move(callee));
    RETURN_IF_ERROR(ParseCallArgs(node.get()));
    RETURN_IF_ERROR(Seal(node.get()));
    return node;
  }

  absl::StatusOr<std::string> DottedName() {
    ASSIGN_OR_RETURN(std::string name, ExpectName());
    while (IsOp(Cur(), ".")) {
      Next();
      ASSIGN_OR_RETURN(std::string part, ExpectName());
      absl::StrAppend(&name, ".", part);
    }
    return name;
  }

  // One filter after its "|" (`subject` may be null: a set block's).
  absl::StatusOr<ExprPtr> ParseFilter(ExprPtr subject) {
    ExprPtr node = Node(Expr::Type::kFilter, Cur().line);
    ASSIGN_OR_RETURN(node->name, DottedName());
    node->args.push_back(std::move(subject));
    if (IsOp(Cur(), "(")) RETURN_IF_ERROR(ParseCallArgs(node.get()));
    RETURN_IF_ERROR(Seal(node.get()));
    return node;
  }

  absl::StatusOr<ExprPtr> ParseTest(ExprPtr subject) {
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

  std::vector<Token> tokens_;
  size_t pos_ = 0;
  const int max_nesting_;
  int depth_ = 0;
  int loops_ = 0;  // for loops around the statement being parsed
};

}  // namespace

absl::StatusOr<Body> ParseTemplate(std::vector<Token> tokens, int max_nesting) {
  return Parser(std::move(tokens), max_nesting).Run();
}

}  // namespace seqboat::jinja
