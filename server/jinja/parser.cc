// The statement parser: Jinja2's statements over the expression parser.
#include "server/jinja/parser.h"

#include <initializer_list>
#include <memory>
#include <string>
#include <string_view>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "base/status_macros.h"
#include "server/jinja/expression_parser.h"

namespace seqboat::jinja {
namespace {

// Tags Jinja has that this renderer does not.
constexpr std::string_view kUnsupportedTags[] = {
    "block",  "extends", "include",    "import", "from",  "with",
    "filter", "call",    "autoescape", "do",     "trans", "pluralize"};

class Parser : public ExpressionParser {
 public:
  Parser(std::vector<Token> tokens, int max_nesting)
      : ExpressionParser(std::move(tokens), max_nesting) {}

  absl::StatusOr<Body> Run() {
    std::string end;
    ASSIGN_OR_RETURN(Body body, Subparse({}, &end));
    return body;
  }

 private:
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

  int loops_ = 0;  // for loops around the statement being parsed
};

}  // namespace

absl::StatusOr<Body> ParseTemplate(std::vector<Token> tokens, int max_nesting) {
  return Parser(std::move(tokens), max_nesting).Run();
}

}  // namespace seqboat::jinja
