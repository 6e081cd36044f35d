#include "fuzz/request_checks.h"

#include <algorithm>
#include <cmath>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "fuzz/embedded_tokenizers.h"
#include "fuzz/fuzz_check.h"

namespace seqboat::fuzz {
namespace {

bool InRange(float x, float low, float high) {
  return std::isfinite(x) && x >= low && x <= high;
}

}  // namespace

const Tokenizer& RequestTokenizer() {
  static const auto* const tokenizers =
      new std::vector<std::unique_ptr<Tokenizer>>(LoadEmbeddedTokenizers({}));
  for (int i = 0; i < kNumEmbeddedTokenizers; ++i) {
    if (std::string(kEmbeddedTokenizers[i].name) == "byte_bpe.json") {
      return *(*tokenizers)[i];
    }
  }
  FUZZ_CHECK(false, "byte_bpe.json is not embedded");
  return *(*tokenizers)[0];
}

const Vocabulary& RequestVocabulary() {
  static const Vocabulary* const vocabulary =
      new Vocabulary(TokenizerVocabulary(
          RequestTokenizer(),
          PromptRules{RequestTokenizer().vocab_size() - 8, std::nullopt}));
  return *vocabulary;
}

ValidationLimits RequestLimits() {
  ValidationLimits limits;
  limits.max_new_tokens_default = 16;
  limits.max_new_tokens_limit = 64;
  limits.max_prompt_tokens = 32;
  limits.max_prompt_bytes = 256;
  return limits;
}

RequestFallbacks Fallbacks() { return {"fallback-id", 7}; }

void CheckValidated(const v1::GenerateRequest& proto,
                    const absl::StatusOr<Request>& request) {
  if (!request.ok()) {
    const absl::Status& s = request.status();
    FUZZ_CHECK(s.code() == absl::StatusCode::kInvalidArgument ||
                   (s.code() == absl::StatusCode::kInternal &&
                    absl::StartsWith(s.message(), "tokenizer produced id")),
               "%s", s.ToString().c_str());
    return;
  }
  const Vocabulary& vocabulary = RequestVocabulary();
  const ValidationLimits limits = RequestLimits();
  const RequestFallbacks fallbacks = Fallbacks();

  FUZZ_CHECK(!request->id.empty() &&
             request->id.size() <= static_cast<size_t>(kMaxRequestIdBytes));
  FUZZ_CHECK(request->id == (proto.request_id().empty() ? fallbacks.request_id
                                                        : proto.request_id()));
  const std::vector<int32_t>& prompt = request->prompt;
  FUZZ_CHECK(!prompt.empty() &&
             prompt.size() <= static_cast<size_t>(limits.max_prompt_tokens));
  bool any_text = false;
  for (int32_t id : prompt) {
    FUZZ_CHECK(id >= 0 && id < vocabulary.rules.vocab_limit, "prompt id %d",
               id);
    any_text |= !vocabulary.is_special(id);
  }
  if (proto.has_token_ids()) FUZZ_CHECK(any_text);

  FUZZ_CHECK(request->n >= 1 && request->n <= std::min(limits.max_n, kMaxN));
  FUZZ_CHECK(request->n ==
             (proto.has_n() ? static_cast<int32_t>(proto.n()) : 1));

  const SamplingParams& sampling = request->sampling;
  FUZZ_CHECK(InRange(sampling.temperature, 0, kMaxTemperature));
  FUZZ_CHECK(sampling.top_k >= 0);
  FUZZ_CHECK(InRange(sampling.top_p, 0, 1) && sampling.top_p > 0);
  FUZZ_CHECK(InRange(sampling.min_p, 0, 1));
  FUZZ_CHECK(InRange(sampling.repetition_penalty, 0, kMaxRepetitionPenalty) &&
             sampling.repetition_penalty > 0);
  FUZZ_CHECK(
      InRange(sampling.presence_penalty, -kMaxCountPenalty, kMaxCountPenalty));
  FUZZ_CHECK(
      InRange(sampling.frequency_penalty, -kMaxCountPenalty, kMaxCountPenalty));
  FUZZ_CHECK(
      sampling.seed ==
      (proto.sampling().has_seed() ? proto.sampling().seed() : fallbacks.seed));

  const StoppingParams& stopping = request->stopping;
  FUZZ_CHECK(stopping.max_new_tokens >= 1 &&
             stopping.max_new_tokens <= limits.max_new_tokens_limit);
  FUZZ_CHECK(stopping.min_new_tokens >= 0 &&
             stopping.min_new_tokens <= stopping.max_new_tokens);
  FUZZ_CHECK(stopping.stop_strings.size() <=
             static_cast<size_t>(kMaxStopStrings));
  for (const std::string& stop : stopping.stop_strings) {
    FUZZ_CHECK(!stop.empty() &&
               stop.size() <= static_cast<size_t>(kMaxStopStringBytes));
  }
  FUZZ_CHECK(stopping.stop_token_ids.size() <=
             static_cast<size_t>(kMaxStopTokenIds));
  for (int32_t id : stopping.stop_token_ids) {
    FUZZ_CHECK(id >= 0 && id < vocabulary.rules.vocab_limit, "stop id %d", id);
  }
  FUZZ_CHECK(request->top_logprobs >= 0 &&
             request->top_logprobs <= kMaxTopLogprobs);
  if (request->top_logprobs > 0) FUZZ_CHECK(request->logprobs);
}

}  // namespace seqboat::fuzz
