#include "server/jinja/parse_cursor.h"

#include <algorithm>
#include <memory>

#include "absl/strings/str_cat.h"

namespace seqboat::jinja {

absl::Status ParseCursor::Fail(int line, const std::string& message) const {
  return absl::InvalidArgumentError(absl::StrCat("line ", line, ": ", message));
}

absl::Status ParseCursor::TooDeep() const {
  return Fail(Cur().line, absl::StrCat("the template nests more than ",
                                       max_nesting_, " levels"));
}

absl::Status ParseCursor::Expected(const std::string& what) const {
  return Fail(Cur().line,
              absl::StrCat("expected ", what, ", got ", Describe(Cur())));
}

absl::Status ParseCursor::ExpectOp(std::string_view op) {
  if (!IsOp(Cur(), op)) {
    return Expected(absl::StrCat("'", std::string(op), "'"));
  }
  Next();
  return absl::OkStatus();
}

absl::Status ParseCursor::ExpectType(TokenType type, const char* what) {
  if (Cur().type != type) return Expected(what);
  Next();
  return absl::OkStatus();
}

absl::Status ParseCursor::ExpectBlockEnd() {
  return ExpectType(TokenType::kBlockEnd, "'end of statement block'");
}

absl::StatusOr<std::string> ParseCursor::ExpectName() {
  if (Cur().type != TokenType::kName) return Expected("a name");
  std::string name = Cur().text;
  Next();
  return name;
}

absl::Status ParseCursor::Seal(Expr* e) const {
  int depth = 0;
  for (const ExprPtr& arg : e->args) {
    if (arg != nullptr) depth = std::max(depth, arg->depth);
  }
  for (const auto& [name, arg] : e->kwargs) {
    depth = std::max(depth, arg->depth);
  }
  e->depth = depth + 1;
  if (e->depth > 2 * max_nesting_) {
    return Fail(e->line, absl::StrCat("an expression nests more than ",
                                      2 * max_nesting_, " operations"));
  }
  return absl::OkStatus();
}

ExprPtr ParseCursor::Node(Expr::Type type, int line) {
  auto e = std::make_unique<Expr>();
  e->type = type;
  e->line = line;
  return e;
}

}  // namespace seqboat::jinja
