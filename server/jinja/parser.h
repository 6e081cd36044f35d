// Builds the statements of a template from its tokens, following Jinja2's
// parser (its precedence, its statement forms) for the subset chat
// templates use: if/elif/else, for (with unpacking, an `if` filter, else,
// break and continue), set (names, unpacking, namespace attributes, blocks),
// macro, print, raw, generation, and every expression form but `*args`.
// Nesting (brackets, operators, blocks) is bounded by `max_nesting`. Errors
// are INVALID_ARGUMENT "line N: ...". Internal to //server/jinja.
#ifndef SEQBOAT_SERVER_JINJA_PARSER_H_
#define SEQBOAT_SERVER_JINJA_PARSER_H_

#include <vector>

#include "absl/status/statusor.h"
#include "server/jinja/ast.h"
#include "server/jinja/lexer.h"

namespace seqboat::jinja {

absl::StatusOr<Body> ParseTemplate(std::vector<Token> tokens, int max_nesting);

}  // namespace seqboat::jinja

#endif  // SEQBOAT_SERVER_JINJA_PARSER_H_
