// Turns a GenerateRequest from the wire into an engine Request, checking every
// field first so that nothing malformed reaches the engine thread. Errors are
// INVALID_ARGUMENT and name the offending field, e.g.
// "sampling.top_p must be in (0, 1], got 1.5".
#ifndef SEQBOAT_SERVER_REQUEST_VALIDATION_H_
#define SEQBOAT_SERVER_REQUEST_VALIDATION_H_

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "engine/request.h"
#include "engine/tokenizer/tokenizer.h"
#include "seqboat/v1/generate.pb.h"

namespace seqboat {

// Fixed bounds of the public API (see generate.proto).
inline constexpr int kMaxStopStrings = 16;
inline constexpr int kMaxStopTokenIds = 256;
inline constexpr int kMaxStopStringBytes = 256;
inline constexpr int kMaxTopLogprobs = 20;
inline constexpr int kMaxRequestIdBytes = 256;
inline constexpr int kMaxCacheSaltBytes = 256;
inline constexpr float kMaxTemperature = 100.0f;
inline constexpr float kMaxRepetitionPenalty = 100.0f;
// presence_penalty and frequency_penalty lie in [-2, 2], as OpenAI's.
inline constexpr float kMaxCountPenalty = 2.0f;
// Sequences one request may sample (n); a server with fewer slots allows
// only as many as it has (ValidationLimits::max_n).
inline constexpr int kMaxN = 16;

// Server-configured limits.
struct ValidationLimits {
  int32_t max_new_tokens_default = 256;  // used when the field is unset
  int32_t max_new_tokens_limit = 4096;   // larger values are rejected
  int32_t max_prompt_tokens = 1 << 20;   // after tokenizing
  // Text longer than this is refused before it costs a tokenization.
  int32_t max_prompt_bytes = 16 << 20;
  // n's ceiling: kMaxN, or the engine's max_slots when that is smaller (a
  // request of n waits for n free slots).
  int32_t max_n = kMaxN;
  // Speculative decoding: what a request that names no method gets (method
  // kNone: off), and the ceiling of num_draft_tokens.
  SpeculativeParams speculative_default;
  int32_t max_draft_tokens = 8;
  bool draft_model = false;  // the server has one (method draft_model)
  bool mtp_head = false;     // the model has one (method mtp)
  // A constraint's size and repetition counts (sampling's constraint oneof).
  ConstraintLimits constraint;
};

// INVALID_ARGUMENT naming `field` when `text` is over the byte limit.
absl::Status CheckTextBytes(absl::string_view field, absl::string_view text,
                            const ValidationLimits& limits);

// What validation needs to know about the model's vocabulary. Kept to plain
// callables so validation can be tested without loading a model; the service
// fills it from the engine's tokenizer.
struct Vocabulary {
  // What a prompt's ids must be (the engine's summary says); stop ids need
  // only be below rules.vocab_limit.
  PromptRules rules;
  // Tokenizes a text prompt.
  std::function<absl::StatusOr<std::vector<int32_t>>(absl::string_view)> encode;
  // True for control tokens (BOS, EOS, padding...) that are not text.
  std::function<bool(int32_t)> is_special;
};

// A served model's vocabulary: `tokenizer` encodes and says which ids are
// special; `rules` are the engine's (ModelSummary::prompt_rules). The
// tokenizer must outlive the result.
Vocabulary TokenizerVocabulary(const Tokenizer& tokenizer,
                               const PromptRules& rules);

// Values the server supplies when the client leaves them out. Passed in, not
// drawn here, so the conversion stays a pure function.
struct RequestFallbacks {
  std::string request_id;  // used when request_id is empty
  uint64_t seed = 0;       // used when sampling.seed is unset
  // The call's, like the above the server's to supply: the tenant whose
  // part of the prefix cache the request reads and writes ("" without API
  // keys, or when tenants share the cache). cache_salt splits it further.
  std::string cache_tenant;
};

// The field an INVALID_ARGUMENT from this unit names, as written at the
// start of its message ("sampling.top_p", "stopping.stop[2]",
// "token_ids.ids[0]"), or "" for any other status. Front ends that speak
// another API's names (the OpenAI one) map it to their own.
std::string InvalidField(const absl::Status& status);

// Validates `proto` and builds the engine request (without sink, control or
// deadline, which belong to the call). Returns INVALID_ARGUMENT naming the
// field on the first problem found.
absl::StatusOr<Request> RequestFromProto(const v1::GenerateRequest& proto,
                                         const Vocabulary& vocabulary,
                                         const ValidationLimits& limits,
                                         const RequestFallbacks& fallbacks);

}  // namespace seqboat

#endif  // SEQBOAT_SERVER_REQUEST_VALIDATION_H_
