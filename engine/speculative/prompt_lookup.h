// Prompt lookup drafting: the next tokens are guessed as those that followed
// the latest earlier occurrence of the context's last n tokens (n from
// ngram_max down to ngram_min), which pays off wherever the output repeats
// its input (code edits, summaries, extraction). No model runs.
//
// The context grows one token at a time; an index of every n-gram's latest
// occurrence keeps each Append and Draft O(ngram_max), whatever the length.
#ifndef SEQBOAT_ENGINE_SPECULATIVE_PROMPT_LOOKUP_H_
#define SEQBOAT_ENGINE_SPECULATIVE_PROMPT_LOOKUP_H_

#include <cstdint>
#include <vector>

#include "absl/container/flat_hash_map.h"

namespace seqboat {

class PromptLookup {
 public:
  // 1 <= ngram_min <= ngram_max (clamped so).
  PromptLookup(int32_t ngram_min, int32_t ngram_max);

  void Append(int32_t token);
  void Append(const std::vector<int32_t>& tokens);
  // Up to max_tokens tokens that followed the longest matching earlier
  // n-gram; empty when the context's last ngram_min tokens never occurred
  // before.
  std::vector<int32_t> Draft(int32_t max_tokens) const;

  const std::vector<int32_t>& context() const { return context_; }

 private:
  // Hash of the n tokens ending before `end`.
  uint64_t Hash(int64_t end, int32_t n) const;
  // Whether the n tokens ending before a and before b are equal.
  bool Same(int64_t a, int64_t b, int32_t n) const;

  int32_t ngram_min_, ngram_max_;
  std::vector<int32_t> context_;
  // Per n (index n - ngram_min): n-gram hash -> the end (exclusive) of its
  // latest occurrence that has a token after it.
  std::vector<absl::flat_hash_map<uint64_t, int64_t>> latest_;
};

}  // namespace seqboat

#endif  // SEQBOAT_ENGINE_SPECULATIVE_PROMPT_LOOKUP_H_
