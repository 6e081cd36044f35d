// Splits a template into Jinja's tokens the way Jinja2's lexer does with
// transformers' settings (trim_blocks and lstrip_blocks on, the default
// delimiters): text, {{ }}, {% %} with their "-"/"+" whitespace control,
// comments and {% raw %} dropped or kept as text, and inside tags names,
// numbers, string literals (Python escapes) and operators. Line breaks are
// "\n" (\r\n and \r become one) and one trailing newline is dropped, as
// Jinja does. Internal to //server/jinja.
#ifndef SEQBOAT_SERVER_JINJA_LEXER_H_
#define SEQBOAT_SERVER_JINJA_LEXER_H_

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"

namespace seqboat::jinja {

enum class TokenType {
  kData,
  kVariableBegin,
  kVariableEnd,
  kBlockBegin,
  kBlockEnd,
  kName,
  kString,
  kInteger,
  kFloat,
  kOperator,
  kEof,
};

struct Token {
  TokenType type = TokenType::kEof;
  // Data: the text; name and operator: as written; string: decoded.
  std::string text;
  int64_t integer = 0;
  double number = 0;
  int line = 1;
};

// "'name'", "end of print statement"... as Jinja names a token in errors.
std::string Describe(const Token& token);

// Errors are INVALID_ARGUMENT "line N: ...".
absl::StatusOr<std::vector<Token>> Tokenize(std::string_view source);

}  // namespace seqboat::jinja

#endif  // SEQBOAT_SERVER_JINJA_LEXER_H_
