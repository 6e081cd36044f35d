// Constrained decoding's host cost per token: for each vocabulary (the test
// tokenizers, and synthetic ones of 50k and 248k tokens shaped like a
// byte-level BPE vocabulary), each constraint kind's compile time and the
// time to fill the next-token bitmask and accept a token along a text the
// constraint allows, tokenized greedily (the longest allowed token first);
// then, at the largest vocabulary, compile times of constraints at the
// limits an untrusted client may reach.
//
//   bazel run //bench:grammar_mask_bench [-- --threads=N]
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <memory>
#include <random>
#include <string>
#include <string_view>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "bench/synthetic_vocab.h"
#include "engine/backend/token_bitmask.h"
#include "engine/grammar/grammar.h"
#include "engine/tokenizer/tokenizer.h"

ABSL_FLAG(int, threads, 1, "threads one compilation may use");
ABSL_FLAG(bool, only_limits, false, "print only the compile times at limits");

namespace seqboat::bench {
namespace {

using Clock = std::chrono::steady_clock;

double Seconds(Clock::time_point a, Clock::time_point b) {
  return std::chrono::duration<double>(b - a).count();
}

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

struct Case {
  const char* name;
  Constraint constraint;
  std::string text;  // allowed by the constraint
};

std::vector<Case> Cases() {
  return {
      {"json_schema",
       {ConstraintKind::kJsonSchema,
        R"({"type":"object","properties":{"name":{"type":"string"},)"
        R"("age":{"type":"integer","minimum":0},"tags":{"type":"array",)"
        R"("items":{"type":"string"}},"kind":{"enum":["cat","dog"]}},)"
        R"("required":["name","age","tags","kind"],)"
        R"("additionalProperties":false})",
        {}},
       R"({"name": "Ada Lovelace wrote the first program", "age": 36, )"
       R"("tags": ["math", "engines", "notes"], "kind": "cat"})"},
      {"json_object",
       {ConstraintKind::kAnyJson, "", {}},
       R"({"a": [1, 2.5, null, true], "text": "the quick brown fox", )"
       R"("nested": {"k": "v"}})"},
      {"regex",
       {ConstraintKind::kRegex,
        R"([A-Z][a-z]+ [0-9]{4}-[0-9]{2}-[0-9]{2})",
        {}},
       "Monday 2026-11-27"},
      {"choice",
       {ConstraintKind::kChoice, "", {"positive", "negative", "neutral"}},
       "negative"},
      {"grammar",
       {ConstraintKind::kGrammar,
        "root ::= expr\nexpr ::= term ((\"+\" | \"-\") term)*\n"
        "term ::= [0-9]+ | \"(\" expr \")\"\n",
        {}},
       "(12+3)-(45-(6+789))+10"},
  };
}

void Run(const Vocab& v) {
  const int32_t stop = static_cast<int32_t>(v.tokens.size()) - 1;
  auto vocab = GrammarVocab::FromTokenBytes(
      v.tokens, static_cast<int32_t>(v.tokens.size()), {stop});
  if (!vocab.ok()) {
    std::printf("%s: %s\n", v.name.c_str(),
                std::string(vocab.status().message()).c_str());
    return;
  }
  GrammarCompilerOptions options;
  options.compile_threads = absl::GetFlag(FLAGS_threads);
  GrammarCompiler compiler(*vocab, options);
  for (const Case& c : Cases()) {
    auto grammar = compiler.Compile(c.constraint);
    if (!grammar.ok()) {
      std::printf("%s %s: %s\n", v.name.c_str(), c.name,
                  std::string(grammar.status().message()).c_str());
      continue;
    }
    GrammarMatcher m(*grammar);
    std::vector<uint32_t> words(m.bitmask_words());
    std::vector<double> mask_us, accept_us;
    std::string_view rest = c.text;
    while (true) {
      const Clock::time_point t0 = Clock::now();
      const bool masked = m.FillNextTokenBitmask(words.data()).value_or(true);
      mask_us.push_back(1e6 * Seconds(t0, Clock::now()));
      (void)masked;
      int32_t best = rest.empty() ? stop : -1;
      size_t best_len = 0;
      for (int32_t id = 0; id < stop && !rest.empty(); ++id) {
        const std::string& t = v.tokens[id];
        if (t.size() > best_len && rest.substr(0, t.size()) == t &&
            TokenBitmaskHas(words.data(), id)) {
          best = id;
          best_len = t.size();
        }
      }
      if (best < 0) {
        std::printf("%s %s: no allowed token continues the text\n",
                    v.name.c_str(), c.name);
        break;
      }
      const Clock::time_point t1 = Clock::now();
      const bool ok = m.Accept(best).ok();
      accept_us.push_back(1e6 * Seconds(t1, Clock::now()));
      if (!ok || best == stop) break;
      rest.remove_prefix(best_len);
    }
    const double worst = *std::max_element(mask_us.begin(), mask_us.end());
    std::printf(
        "%-16s %-12s compile %8.1f ms  tokens %3zu  mask median %7.1f us "
        "max %7.1f us  accept median %6.1f us\n",
        v.name.c_str(), c.name, (*grammar)->compile_ms(), mask_us.size(),
        Median(mask_us), worst, Median(accept_us));
  }
}

// Constraints at the limits an untrusted client may reach (ConstraintLimits'
// defaults: 32 KiB of text, character counts up to 64, item counts up to
// 4096) and some past them: their compile times.
void RunLimits(const Vocab& v) {
  const int32_t stop = static_cast<int32_t>(v.tokens.size()) - 1;
  auto vocab = GrammarVocab::FromTokenBytes(
      v.tokens, static_cast<int32_t>(v.tokens.size()), {stop});
  if (!vocab.ok()) return;
  GrammarCompilerOptions options;
  options.compile_threads = absl::GetFlag(FLAGS_threads);
  GrammarCompiler compiler(*vocab, options);
  std::string nested = "{\"type\":\"integer\"}";
  for (int i = 0; i < 60; ++i)
    nested = "{\"type\":\"array\",\"items\":" + nested + "}";
  std::string wide = "{\"type\":\"object\",\"properties\":{";
  for (int i = 0; i < 300; ++i)
    wide +=
        (i ? ",\"p" : "\"p") + std::to_string(i) + "\":{\"type\":\"string\"}";
  wide += "}}";
  std::string alternatives = "root ::= ";
  for (int i = 0; i < 4000; ++i)
    alternatives += (i ? " | \"w" : "\"w") + std::to_string(i * 7919) + "\"";
  const std::vector<std::pair<const char*, Constraint>> cases = {
      {"string maxLength 256",
       {ConstraintKind::kJsonSchema,
        R"({"type":"string","minLength":200,"maxLength":256})",
        {}}},
      {"array maxItems 4096",
       {ConstraintKind::kJsonSchema,
        R"({"type":"array","items":{"type":"number"},"maxItems":4096})",
        {}}},
      {"arrays nested 60 deep", {ConstraintKind::kJsonSchema, nested, {}}},
      {"300 properties", {ConstraintKind::kJsonSchema, wide, {}}},
      {"regex [a-z]{1,8}", {ConstraintKind::kRegex, "[a-z]{1,8}x", {}}},
      {"regex [a-z]{1,32}", {ConstraintKind::kRegex, "[a-z]{1,32}x", {}}},
      {"regex [a-z]{1,256}", {ConstraintKind::kRegex, "[a-z]{1,256}x", {}}},
      {"regex [a-z]{256}", {ConstraintKind::kRegex, "[a-z]{256}x", {}}},
      {"regex [a-z]+", {ConstraintKind::kRegex, "[a-z]+x", {}}},
      {"string maxLength 16",
       {ConstraintKind::kJsonSchema,
        R"({"type":"string","maxLength":16})",
        {}}},
      {"regex nested stars",
       {ConstraintKind::kRegex, "((a|b)*(c|d)*)*((e|f)*[0-9]+)*", {}}},
      {"EBNF 4000 alternatives", {ConstraintKind::kGrammar, alternatives, {}}},
  };
  for (const auto& [name, c] : cases) {
    const Clock::time_point t0 = Clock::now();
    auto grammar = compiler.Compile(c);
    const double ms = 1e3 * Seconds(t0, Clock::now());
    std::printf("%-16s limits %-24s %s %8.1f ms\n", v.name.c_str(), name,
                grammar.ok() ? "compiled in" : "refused in ", ms);
    if (!grammar.ok())
      std::printf("    %s\n", std::string(grammar.status().message()).c_str());
  }
}

}  // namespace
}  // namespace seqboat::bench

int main(int argc, char** argv) {
  absl::ParseCommandLine(argc, argv);
  using seqboat::bench::Vocab;
  std::vector<Vocab> vocabs;
  for (const char* name : {"byte_bpe", "qwen3_5_bpe"}) {
    auto tok = seqboat::LoadTokenizer(std::string("tests/data/tokenizers/") +
                                      name + ".json");
    if (!tok.ok()) {
      std::printf("%s: %s\n", name,
                  std::string(tok.status().message()).c_str());
      return 1;
    }
    Vocab v{name, {}};
    for (int32_t id = 0; id < (*tok)->vocab_size(); ++id)
      v.tokens.push_back((*tok)->IsSpecial(id) ? "" : (*tok)->TokenBytes(id));
    v.tokens.push_back("");
    vocabs.push_back(std::move(v));
  }
  vocabs.push_back(seqboat::bench::Synthetic(50000));
  vocabs.push_back(seqboat::bench::Synthetic(248000));
  if (!absl::GetFlag(FLAGS_only_limits))
    for (const Vocab& v : vocabs) seqboat::bench::Run(v);
  seqboat::bench::RunLimits(vocabs.back());
  return 0;
}
