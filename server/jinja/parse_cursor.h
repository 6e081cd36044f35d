// What the template's parsers share: their place in the token stream (with
// one token of lookahead), the expectations that fail with Jinja's errors
// ("line N: expected ..., got ..."), the bound on nesting, and new nodes
// sealed with their depth. Internal to //server/jinja.
#ifndef SEQBOAT_SERVER_JINJA_PARSE_CURSOR_H_
#define SEQBOAT_SERVER_JINJA_PARSE_CURSOR_H_

#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "server/jinja/ast.h"
#include "server/jinja/lexer.h"

namespace seqboat::jinja {

class ParseCursor {
 protected:
  // `tokens` ends with kEof, as Tokenize gives them.
  ParseCursor(std::vector<Token> tokens, int max_nesting)
      : tokens_(std::move(tokens)), max_nesting_(max_nesting) {}

  // Counts one level of nesting for as long as it lives.
  class Nest {
   public:
    explicit Nest(ParseCursor* p) : p_(p) { ++p_->depth_; }
    ~Nest() { --p_->depth_; }
    bool too_deep() const { return p_->depth_ > p_->max_nesting_; }

   private:
    ParseCursor* p_;
  };

  const Token& Cur() const { return tokens_[pos_]; }
  const Token& Look() const {
    return tokens_[pos_ + 1 < tokens_.size() ? pos_ + 1 : pos_];
  }
  // Stays on the final kEof.
  void Next() {
    if (pos_ + 1 < tokens_.size()) ++pos_;
  }

  static bool IsName(const Token& t, std::string_view name) {
    return t.type == TokenType::kName && t.text == name;
  }
  static bool IsOp(const Token& t, std::string_view op) {
    return t.type == TokenType::kOperator && t.text == op;
  }

  absl::Status Fail(int line, const std::string& message) const;
  absl::Status TooDeep() const;
  // "expected `what`, got <the current token>".
  absl::Status Expected(const std::string& what) const;
  // The current token if it is the one expected, then the next.
  absl::Status ExpectOp(std::string_view op);
  absl::Status ExpectType(TokenType type, const char* what);
  absl::Status ExpectBlockEnd();
  absl::StatusOr<std::string> ExpectName();

  // Records the depth of a node whose operands are complete; operator and
  // filter chains nest without brackets, so this bounds them too.
  absl::Status Seal(Expr* e) const;
  static ExprPtr Node(Expr::Type type, int line);

 private:
  std::vector<Token> tokens_;
  size_t pos_ = 0;
  const int max_nesting_;
  int depth_ = 0;
};

}  // namespace seqboat::jinja

#endif  // SEQBOAT_SERVER_JINJA_PARSE_CURSOR_H_
