// The contract between the server and the engine: what a generation request
// carries, the events it produces, and how its client reaches it while it runs.
#ifndef SEQBOAT_ENGINE_REQUEST_H_
#define SEQBOAT_ENGINE_REQUEST_H_

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "engine/backend/sampling_params.h"
#include "engine/grammar/constraint.h"

namespace seqboat {

class Grammar;  // engine/grammar/grammar.h

struct StoppingParams {
  int32_t max_new_tokens = 256;
  // Until this many tokens are generated nothing stops the sequence but
  // max_new_tokens: EOS and the stop ids are never drawn (vLLM's min_tokens)
  // and stop strings are not looked for. <= max_new_tokens.
  int32_t min_new_tokens = 0;
  std::vector<std::string> stop_strings;
  std::vector<int32_t> stop_token_ids;
  bool ignore_eos = false;
};

// Speculative decoding (engine/speculative): drafts of up to
// num_draft_tokens tokens are verified by the model in one step. The output
// is what decoding without it gives: the model's own draw at each position
// decides, so greedy and seeded requests produce the same tokens either way.
enum class SpeculativeMethod {
  kNone,
  // Prompt lookup: the tokens that followed the latest earlier occurrence of
  // the context's last n-gram (n from ngram_max down to ngram_min).
  kPromptLookup,
  // A draft model's greedy guesses (the engine's EngineOptions::
  // draft_model_dir: a smaller model with the same tokenizer).
  kDraftModel,
  // The served model's own multi-token-prediction head (Qwen3.5's, when the
  // converted checkpoint carries one: config "mtp"), fed its hidden state.
  kMtp,
};

// "none", "prompt_lookup", "draft_model", "mtp": the names the APIs and
// metrics use.
std::string_view SpeculativeMethodName(SpeculativeMethod method);

struct SpeculativeParams {
  SpeculativeMethod method = SpeculativeMethod::kNone;
  int32_t num_draft_tokens = 0;  // 0: the method does not run
  int32_t ngram_min = 2;
  int32_t ngram_max = 4;
};

enum class FinishReason { kNone, kLength, kStopString, kEos, kCancelled };

// One step's output for one of a request's sequences (`index`, the choice).
// A sequence's events arrive in order, and its last one has finish != kNone
// or a non-OK status; the request is over once each of its n sequences has
// had its last event.
struct GenerationEvent {
  int32_t index = 0;  // which of the request's n sequences, in [0, n)
  std::vector<int32_t> token_ids;
  std::string text;                     // complete UTF-8 only
  std::vector<TokenLogprobs> logprobs;  // one per token id when requested
  FinishReason finish = FinishReason::kNone;
  std::string matched_stop;
  int32_t prompt_tokens = 0;
  int32_t cached_prompt_tokens =
      0;                         // of prompt_tokens, restored from a snapshot
  int32_t generated_tokens = 0;  // of this sequence
  absl::Status status;           // non-OK ends the sequence with that error
};

// Receives a request's events, in order, from the engine's delivery thread
// (never under an engine lock). Must not block: the server buffers and
// coalesces. Called for each sequence's final event exactly once.
using EventSink = std::function<void(GenerationEvent)>;

// A request's sink, shared by its copies (the sequences of a request of n)
// and by the events queued for delivery, so that an event can outlive the
// sequence that produced it. Copying it costs a reference count, never an
// allocation.
class SharedSink {
 public:
  SharedSink() = default;
  template <typename F, typename = std::enable_if_t<
                            !std::is_same_v<std::decay_t<F>, SharedSink>>>
  SharedSink(F&& f)  // NOLINT: set from any callable, as an EventSink is
      : fn_(std::make_shared<const EventSink>(std::forward<F>(f))) {}

  explicit operator bool() const { return fn_ != nullptr && *fn_; }
  // The same for every copy of one sink.
  const void* id() const { return fn_.get(); }
  void operator()(GenerationEvent event) const { (*fn_)(std::move(event)); }

 private:
  std::shared_ptr<const EventSink> fn_;
};

// Shared between the server (which may cancel) and the engine (which polls).
struct RequestControl {
  std::atomic<bool> cancelled{false};
};

struct Request {
  std::string id;
  std::vector<int32_t> prompt;  // token ids, validated against the vocabulary
  // Sequences sampled from the prompt (OpenAI's n), in [1, max_slots]: the
  // prompt is read once, its state copied into n slots, and sequence i
  // samples with seed + i (wrapping), each with its own stop rules.
  // Admitted once n slots are free; cancel and deadline apply to all.
  int32_t n = 1;
  SamplingParams sampling;
  StoppingParams stopping;
  bool logprobs = false;
  int32_t top_logprobs = 0;
  SpeculativeParams speculative;
  // Constrained decoding (engine/grammar): each sequence's output stays a
  // prefix of a text the constraint matches, and ends (kEos) when the text
  // is complete and a stop token is drawn. Compiled at Submit, which
  // refuses one the compiler cannot build with INVALID_ARGUMENT naming it.
  std::optional<Constraint> constraint;
  // The constraint compiled for the engine's vocabulary: set by
  // Engine::Submit (a caller's value is replaced), shared by the request's
  // sequences, each of which follows it with its own matcher.
  std::shared_ptr<const Grammar> grammar;
  absl::Time deadline = absl::InfiniteFuture();
  absl::Time arrival = absl::Now();
  std::shared_ptr<RequestControl> control = std::make_shared<RequestControl>();
  SharedSink sink;
  // Whose queue it waits in: the scheduler admits tenants' oldest requests
  // in turn (the server's tenant of the API key; "" for all without keys).
  std::string tenant;
  // The prefix-cache partition the request reads and writes: snapshots are
  // found only by requests of the same scope (the server's tenant and
  // cache_salt; "" is one partition like any other).
  std::string cache_scope;
};

// Prompt lookup's longest n-gram: its index keeps one map per size.
inline constexpr int32_t kMaxNgram = 64;

// Why `params`' n-gram sizes cannot be used ("n-gram sizes must satisfy 1 <=
// ngram_min <= ngram_max <= 64, got 5 and 2"), or "" when they can. The one
// statement of the rule: the server's validation names the field, and
// Engine::Submit applies it again for any caller.
std::string NgramSizesProblem(const SpeculativeParams& params);

// What a prompt's ids must be for the loaded model: below vocab_limit (the
// ids both the tokenizer and the embedding cover) and never the padding row,
// which fairseq models never read in training. The one statement of the
// rule: the server's validation applies it to clients' ids, naming their
// field; Engine::Submit applies it again before a prompt can reach the
// embedding (Engine's summary publishes the rules).
struct PromptRules {
  int32_t vocab_limit = 0;
  std::optional<int32_t> padding_id;
};

// Why `id` cannot be a prompt token under `rules` ("must be in [0, 257), got
// 300"), or "" when it can.
std::string PromptIdProblem(const PromptRules& rules, int32_t id);

}  // namespace seqboat

#endif  // SEQBOAT_ENGINE_REQUEST_H_
