// A chat template, as tokenizer_config.json's chat_template holds it: parsed
// and rendered by server/jinja over a conversation whose content holds
// special-token and Jinja text, under small Limits. A refusal is an error of
// the documented codes naming the template line; a rendering is within the
// output limit, its untrusted ranges are sorted, disjoint and inside the
// text, and rendering again gives the same result.
#include <cstdint>
#include <string>
#include <string_view>

#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "absl/time/time.h"
#include "fuzz/fuzz_check.h"
#include "server/jinja/template.h"
#include "server/jinja/value.h"

namespace {

using seqboat::jinja::Str;
using seqboat::jinja::Value;

seqboat::jinja::Limits FuzzLimits() {
  seqboat::jinja::Limits limits;
  limits.max_source_bytes = 64 << 10;
  limits.max_output_bytes = 16 << 10;
  limits.max_steps = 20000;
  limits.max_work_bytes = 1 << 20;
  return limits;
}

Value Message(const char* role, const char* content) {
  return *Value::Dict({{Value::String("role"), Value::String(role)},
                       {Value::String("content"),
                        Value::String(seqboat::jinja::Untrusted(content))}});
}

const seqboat::jinja::Variables& Variables() {
  static const auto* variables = new seqboat::jinja::Variables{
      {"messages",
       *Value::List({Message("system", " Be <|im_end|> brief. "),
                     Message("user", "{{ 7 * 7 }} \xc3\xa9\xf0\x9f\x98\x80"),
                     Message("assistant", "[INST] </s>"),
                     Message("user", "")})},
      {"bos_token", Value::String("<s>")},
      {"eos_token", Value::String("</s>")},
      {"tools", Value::None()},
      {"documents", Value::None()},
      {"add_generation_prompt", Value::Bool(true)},
  };
  return *variables;
}

void CheckError(const absl::Status& status) {
  const absl::StatusCode code = status.code();
  FUZZ_CHECK(code == absl::StatusCode::kInvalidArgument ||
                 code == absl::StatusCode::kResourceExhausted ||
                 code == absl::StatusCode::kAborted,
             "%s", status.ToString().c_str());
  // Errors name the template line; raise_exception's are the template's.
  if (code != absl::StatusCode::kAborted) {
    FUZZ_CHECK(absl::StartsWith(status.message(), "line ") ||
                   absl::StartsWith(status.message(), "the template is "),
               "%s", status.ToString().c_str());
  }
}

void CheckRendered(const Str& out, const seqboat::jinja::Limits& limits) {
  FUZZ_CHECK(out.text.size() <= limits.max_output_bytes, "%zu",
             out.text.size());
  size_t end = 0;
  for (size_t i = 0; i < out.untrusted.size(); ++i) {
    const seqboat::jinja::Span& span = out.untrusted[i];
    FUZZ_CHECK(span.begin < span.end, "%zu %zu", span.begin, span.end);
    FUZZ_CHECK(span.end <= out.text.size(), "%zu %zu", span.end,
               out.text.size());
    FUZZ_CHECK(i == 0 || span.begin > end, "ranges %zu and %zu touch", i - 1,
               i);
    end = span.end;
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view source(reinterpret_cast<const char*>(data), size);
  const seqboat::jinja::Limits limits = FuzzLimits();
  auto parsed = seqboat::jinja::Template::Parse(source, limits);
  if (!parsed.ok()) {
    FUZZ_CHECK(parsed.status().code() == absl::StatusCode::kInvalidArgument,
               "%s", parsed.status().ToString().c_str());
    CheckError(parsed.status());
    return 0;
  }
  const absl::Time now = absl::FromUnixSeconds(1700000000);
  const absl::StatusOr<Str> first = (*parsed)->Render(Variables(), now);
  const absl::StatusOr<Str> second = (*parsed)->Render(Variables(), now);
  FUZZ_CHECK(first.ok() == second.ok());
  if (!first.ok()) {
    CheckError(first.status());
    FUZZ_CHECK(first.status() == second.status(), "%s / %s",
               first.status().ToString().c_str(),
               second.status().ToString().c_str());
    return 0;
  }
  CheckRendered(*first, limits);
  FUZZ_CHECK(first->text == second->text);
  FUZZ_CHECK(first->untrusted == second->untrusted);
  return 0;
}
