// Prompt lookup drafting: the next tokens are guessed as those that followed
// an earlier occurrence of the context's last n tokens (the longest n from
// ngram_max down to ngram_min that occurred before), which pays off wherever
// the output repeats its input (code edits, summaries, extraction). No model
// runs.
//
// Of that n-gram's occurrences, the draft follows the one with the longest
// continuation (the tokens after it, up to the context's end, counted up to
// the draft's length), then the latest: in a loop shorter than the draft the
// latest occurrence would offer only the loop's length, an older one all of
// it. The context grows one token at a time; an index of every n-gram's
// latest occurrence, with a link from each occurrence to the one before,
// keeps Append O(ngram_max^2) and Draft O(ngram_max * (ngram_max +
// max_tokens)), whatever the length: only occurrences in the last max_tokens
// positions can have a short continuation, so the walk back along the links
// stops within about max_tokens of them.
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
  // n-gram, from its occurrence with the longest continuation (then the
  // latest); empty when the context's last ngram_min tokens never occurred
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
  // Per n: for each end indexed in latest_, the end of the previous
  // occurrence of an n-gram of the same hash (-1: none).
  std::vector<std::vector<int32_t>> previous_;
};

}  // namespace seqboat

#endif  // SEQBOAT_ENGINE_SPECULATIVE_PROMPT_LOOKUP_H_
