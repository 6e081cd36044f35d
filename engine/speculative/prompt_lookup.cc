#include "engine/speculative/prompt_lookup.h"

#include <algorithm>

namespace seqboat {

PromptLookup::PromptLookup(int32_t ngram_min, int32_t ngram_max)
    : ngram_min_(std::max(1, ngram_min)),
      ngram_max_(std::max(ngram_min_, ngram_max)),
      latest_(static_cast<size_t>(ngram_max_ - ngram_min_ + 1)) {}

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
  for (int32_t n = ngram_min_; n <= ngram_max_ && n <= end; ++n) {
    latest_[static_cast<size_t>(n - ngram_min_)][Hash(end, n)] = end;
  }
}

void PromptLookup::Append(const std::vector<int32_t>& tokens) {
  for (int32_t t : tokens) Append(t);
}

std::vector<int32_t> PromptLookup::Draft(int32_t max_tokens) const {
  const int64_t len = static_cast<int64_t>(context_.size());
  for (int32_t n = std::min<int64_t>(ngram_max_, len); n >= ngram_min_; --n) {
    const auto& index = latest_[static_cast<size_t>(n - ngram_min_)];
    auto it = index.find(Hash(len, n));
    if (it == index.end() || !Same(it->second, len, n)) continue;
    const int64_t from = it->second;
    const int64_t to = std::min(len, from + std::max(0, max_tokens));
    return std::vector<int32_t>(context_.begin() + from, context_.begin() + to);
  }
  return {};
}

}  // namespace seqboat
