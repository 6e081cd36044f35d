#include "engine/speculative/prompt_lookup.h"

#include <algorithm>

namespace seqboat {

PromptLookup::PromptLookup(int32_t ngram_min, int32_t ngram_max)
    : ngram_min_(std::max(1, ngram_min)),
      ngram_max_(std::max(ngram_min_, ngram_max)),
      latest_(static_cast<size_t>(ngram_max_ - ngram_min_ + 1)),
      previous_(latest_.size()) {}

uint64_t PromptLookup::Hash(int64_t end, int32_t n) const {
  // FNV-1a over the ids; collisions are harmless, Same() confirms a match.
  uint64_t h = 1469598103934665603ull;
  for (int64_t i = end - n; i < end; ++i) {
    h ^= static_cast<uint32_t>(context_[static_cast<size_t>(i)]);
    h *= 1099511628211ull;
  }
  return h;
}

bool PromptLookup::Same(int64_t a, int64_t b, int32_t n) const {
  return std::equal(context_.begin() + (a - n), context_.begin() + a,
                    context_.begin() + (b - n));
}

void PromptLookup::Append(int32_t token) {
  context_.push_back(token);
  // The n-grams ending just before the new token now have a successor.
  const int64_t end = static_cast<int64_t>(context_.size()) - 1;
  for (int32_t n = ngram_min_; n <= ngram_max_; ++n) {
    const size_t i = static_cast<size_t>(n - ngram_min_);
    std::vector<int32_t>& previous = previous_[i];
    previous.resize(static_cast<size_t>(end) + 1, -1);
    if (n > end) continue;
    auto [it, inserted] = latest_[i].try_emplace(Hash(end, n), end);
    if (!inserted) {
      previous[static_cast<size_t>(end)] = static_cast<int32_t>(it->second);
      it->second = end;
    }
  }
}

void PromptLookup::Append(const std::vector<int32_t>& tokens) {
  for (int32_t t : tokens) Append(t);
}

std::vector<int32_t> PromptLookup::Draft(int32_t max_tokens) const {
  const int64_t len = static_cast<int64_t>(context_.size());
  const int64_t want = std::max(0, max_tokens);
  if (want == 0) return {};
  for (int32_t n = std::min<int64_t>(ngram_max_, len); n >= ngram_min_; --n) {
    const size_t i = static_cast<size_t>(n - ngram_min_);
    auto it = latest_[i].find(Hash(len, n));
    if (it == latest_[i].end()) continue;
    // Back from the latest occurrence: continuations only grow, so the
    // first one with `want` tokens after it is the latest of the longest;
    // without one, the earliest seen is. Fewer than `want` ends lie within
    // `want` of the context's end, so the walk is bounded (a few more steps
    // allow for hash collisions, which Same() skips).
    int64_t best = -1;
    int64_t steps = want + 4;
    for (int64_t end = it->second; end >= 0 && steps-- > 0;
         end = previous_[i][static_cast<size_t>(end)]) {
      if (!Same(end, len, n)) continue;
      best = end;
      if (len - end >= want) break;
    }
    if (best < 0) continue;
    const int64_t to = std::min(len, best + want);
    return std::vector<int32_t>(context_.begin() + best, context_.begin() + to);
  }
  return {};
}

}  // namespace seqboat
