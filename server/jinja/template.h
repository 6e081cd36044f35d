// A renderer of the Jinja2 subset that chat templates (tokenizer_config.json's
// chat_template) are written in, rendering as transformers does: Jinja2's
// ImmutableSandboxedEnvironment with trim_blocks and lstrip_blocks, the
// loopcontrols extension, {% generation %} blocks, and the globals
// raise_exception(message) and strftime_now(format); tojson keeps non-ASCII
// characters as they are.
//
// Supported: {{ }}, if/elif/else, for (unpacking, `if` filters, else, loop.*,
// break, continue), set (names, unpacking, namespace attributes, blocks),
// macro, raw, comments and whitespace control; every expression form but
// *args; the builtin filters and tests chat templates use (trim, tojson,
// length, upper, lower, join, map, select, selectattr, default, items...);
// str, dict and list methods that do not mutate (strip, split, startswith,
// get, items...); range, namespace, dict. A feature outside the subset is an
// error naming it, never a silent difference.
//
// A template is untrusted input: its size, nesting, run time (steps), output
// and every string it builds are bounded by Limits. Parse and Render errors
// name the template line ("line 3: ..."). Render's codes: ABORTED when the
// template called raise_exception (the message is the template's own),
// RESOURCE_EXHAUSTED when a limit was reached, INVALID_ARGUMENT otherwise
// (an undefined value used, a type error, an unsupported filter).
//
// A Template is immutable once parsed and may be rendered from several
// threads at once.
#ifndef SEQBOAT_SERVER_JINJA_TEMPLATE_H_
#define SEQBOAT_SERVER_JINJA_TEMPLATE_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "server/jinja/text.h"
#include "server/jinja/value.h"

namespace seqboat::jinja {

struct Limits {
  size_t max_source_bytes = size_t{256} << 10;
  // Brackets, blocks and macro calls within one another.
  int max_nesting = 64;
  // The rendered text; also the longest string any expression may build.
  size_t max_output_bytes = size_t{4} << 20;
  // Expressions evaluated, statements run and items iterated, in all.
  int64_t max_steps = 1'000'000;
  // Bytes of strings built in all (concatenations, filters, the output).
  size_t max_work_bytes = size_t{64} << 20;
};

using Variables = std::vector<std::pair<std::string, Value>>;

struct Stmt;

class Template {
 public:
  static absl::StatusOr<std::unique_ptr<Template>> Parse(
      std::string_view source, const Limits& limits = {});
  ~Template();

  // Renders with `variables` defined (messages, add_generation_prompt,
  // bos_token...). `now` is strftime_now's time, in the local time zone.
  // The text keeps which of its bytes came from untrusted strings among the
  // variables.
  absl::StatusOr<Str> Render(const Variables& variables,
                             absl::Time now = absl::Now()) const;

 private:
  Template() = default;

  std::vector<std::unique_ptr<Stmt>> body_;
  Limits limits_;
};

}  // namespace seqboat::jinja

#endif  // SEQBOAT_SERVER_JINJA_TEMPLATE_H_
