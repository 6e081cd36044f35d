// What the load client sends: prompts from a JSONL file or synthetic ones,
// and the arrival times of an open-loop run. Deterministic for a given seed,
// so runs repeat.
#ifndef SEQBOAT_CLIENTS_LOAD_WORKLOAD_H_
#define SEQBOAT_CLIENTS_LOAD_WORKLOAD_H_

#include <cstdint>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace seqboat {
namespace load {

struct Prompt {
  std::optional<std::string> text;  // exactly one of text and token_ids
  std::vector<int32_t> token_ids;
  std::optional<int32_t> max_new_tokens;  // unset: --output_len
};

// Parses JSONL lines {"text": "..."} or {"token_ids": [...]}, each with an
// optional "max_new_tokens". Blank lines are skipped; any other malformed
// line is an error naming its line number.
absl::StatusOr<std::vector<Prompt>> ParsePromptsJsonl(const std::string& data);
absl::StatusOr<std::vector<Prompt>> LoadPromptsJsonl(const std::string& path);

// Synthetic prompts of random token ids, as vLLM's random dataset: lengths
// uniform in [len * (1 - range_ratio), len * (1 + range_ratio)] (at least
// 1), ids uniform in [0, vocab_size).
struct SyntheticSpec {
  int32_t input_len = 128;
  int32_t output_len = 128;
  double range_ratio = 0;  // 0: every request has exactly these lengths
  int32_t vocab_size = 256;
  uint64_t seed = 0;
};
absl::Status ValidateSyntheticSpec(const SyntheticSpec& spec);
// Request `index`'s prompt: a pure function of (spec, index).
Prompt SyntheticPrompt(const SyntheticSpec& spec, int64_t index);

// Poisson arrivals at `rate` requests/s: exponential gaps from a seeded
// generator. Infinite rate means all at time 0.
class PoissonArrivals {
 public:
  PoissonArrivals(double rate, uint64_t seed);
  // Seconds from the run's start of the next arrival.
  double Next();

 private:
  double rate_;
  double t_ = 0;
  std::mt19937_64 rng_;
};

}  // namespace load
}  // namespace seqboat

#endif  // SEQBOAT_CLIENTS_LOAD_WORKLOAD_H_
