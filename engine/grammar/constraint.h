// What a request asks its output to match, as the client wrote it, and the
// checks made on that text before anything is compiled. Constraints come
// from untrusted clients: their size and the repetition counts they spell
// out are bounded here, so that compilation time and memory stay bounded,
// and a refusal names what is wrong.
#ifndef SEQBOAT_ENGINE_GRAMMAR_CONSTRAINT_H_
#define SEQBOAT_ENGINE_GRAMMAR_CONSTRAINT_H_

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace seqboat {

enum class ConstraintKind {
  kJsonSchema,  // a JSON Schema (OpenAI strict mode's subset and more)
  kAnyJson,     // any JSON value (OpenAI's json_object); text unused
  kRegex,       // a regular expression the whole output matches
  kChoice,      // exactly one of `choices`
  kGrammar,     // an EBNF grammar (GBNF syntax) whose rule `root` starts
};

// "json_schema", "json_object", "regex", "choice", "grammar": the names
// errors and the compile cache use.
std::string_view ConstraintKindName(ConstraintKind kind);

struct Constraint {
  ConstraintKind kind = ConstraintKind::kAnyJson;
  std::string text;                  // the schema, regex or grammar
  std::vector<std::string> choices;  // kChoice only
};

struct ConstraintLimits {
  // The schema, regex or grammar text, or all choices together. Compile
  // time grows with the grammar's states times the vocabulary (about a
  // minute for a 45 KiB schema of 1500 properties at 248k tokens on a
  // loaded 2-core machine: bench/grammar_mask_bench).
  int64_t max_text_bytes = 32 * 1024;
  int32_t max_choices = 1024;
  // Largest count a regex or grammar's {m,n}, or a schema's minLength/
  // maxLength, may name. Bounded character repetition is xgrammar's most
  // expensive construct to compile at large vocabularies: at 248k tokens on
  // a loaded 2-core machine, [a-z]{1,8} took 0.5 s, {1,32} 5 s, {1,256}
  // 41 s (bench/grammar_mask_bench --only_limits).
  int64_t max_repeat = 64;
  // Largest minItems/maxItems/minProperties/maxProperties: these repeat a
  // rule, not states, and cost little.
  int64_t max_count = 4096;
};

// Refuses a constraint that breaks `limits` or is malformed in a way found
// without compiling it (a schema that is not JSON or nests deeper than
// kMaxJsonDepth, an empty or non-UTF-8 choice). The message starts with the
// kind's name.
absl::Status CheckConstraint(const Constraint& constraint,
                             const ConstraintLimits& limits);

// The EBNF grammar matching exactly one of `choices` (already checked).
std::string ChoicesToEbnf(const std::vector<std::string>& choices);

}  // namespace seqboat

#endif  // SEQBOAT_ENGINE_GRAMMAR_CONSTRAINT_H_
