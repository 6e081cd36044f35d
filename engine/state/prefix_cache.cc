#include "engine/state/prefix_cache.h"

#include <algorithm>
#include <utility>

#include "engine/state/prefix_hash.h"

namespace seqboat {

PrefixCache::PrefixCache(int64_t budget_bytes)
    : budget_bytes_(std::max<int64_t>(0, budget_bytes)) {
  stats_.budget_bytes = budget_bytes_;
}

PrefixCache::Lru::iterator PrefixCache::Find(const std::vector<int32_t>& tokens,
                                             size_t len,
                                             const std::string& scope,
                                             uint64_t hash) const {
  auto [first, last] = by_hash_.equal_range(hash);
  for (auto it = first; it != last; ++it) {
    const std::vector<int32_t>& have = it->second->snapshot->tokens;
    if (have.size() == len && it->second->snapshot->scope == scope &&
        std::equal(have.begin(), have.end(), tokens.begin())) {
      return it->second;
    }
  }
  return lru_.end();
}

PrefixCache::Lru::iterator PrefixCache::FindLongest(
    const std::vector<int32_t>& prompt, size_t max_len,
    const std::string& scope) const {
  if (!enabled() || lengths_.empty()) return lru_.end();
  max_len = std::min(max_len, prompt.size());
  // Hashes of every prefix length a snapshot has, in one pass.
  const auto candidates = PrefixCandidates(scope, prompt, max_len, lengths_);
  for (auto c = candidates.rbegin(); c != candidates.rend(); ++c) {
    auto it = Find(prompt, c->first, scope, c->second);
    if (it != lru_.end()) return it;
  }
  return lru_.end();
}

std::shared_ptr<const PrefixSnapshot> PrefixCache::Lookup(
    const std::vector<int32_t>& prompt, size_t max_len,
    const std::string& scope) {
  std::shared_ptr<const PrefixSnapshot> found;
  if (auto it = FindLongest(prompt, max_len, scope); it != lru_.end()) {
    lru_.splice(lru_.begin(), lru_, it);
    found = it->snapshot;
  }
  std::lock_guard<std::mutex> lock(stats_mu_);
  stats_.queries += static_cast<int64_t>(prompt.size());
  if (found != nullptr)
    stats_.hits += static_cast<int64_t>(found->tokens.size());
  return found;
}

size_t PrefixCache::MatchLength(const std::vector<int32_t>& prompt,
                                size_t max_len,
                                const std::string& scope) const {
  auto it = FindLongest(prompt, max_len, scope);
  return it == lru_.end() ? 0 : it->snapshot->tokens.size();
}

std::shared_ptr<const PrefixSnapshot> PrefixCache::Peek(
    const std::vector<int32_t>& prompt, size_t max_len,
    const std::string& scope) const {
  auto it = FindLongest(prompt, max_len, scope);
  return it == lru_.end() ? nullptr : it->snapshot;
}

std::vector<std::shared_ptr<const PrefixSnapshot>> PrefixCache::Snapshots()
    const {
  std::vector<std::shared_ptr<const PrefixSnapshot>> out;
  out.reserve(lru_.size());
  for (const Entry& e : lru_) out.push_back(e.snapshot);
  return out;
}

bool PrefixCache::Insert(PrefixSnapshot snapshot) {
  const size_t len = snapshot.tokens.size();
  if (!enabled() || len == 0 || snapshot.bytes() > budget_bytes_) return false;
  const uint64_t hash = PrefixHashOf(snapshot.scope, snapshot.tokens, len);
  if (auto it = Find(snapshot.tokens, len, snapshot.scope, hash);
      it != lru_.end()) {
    lru_.splice(lru_.begin(), lru_, it);
    return true;
  }
  const int64_t bytes = snapshot.bytes();
  int64_t held;
  {
    std::lock_guard<std::mutex> lock(stats_mu_);
    held = stats_.bytes;
  }
  while (held + bytes > budget_bytes_ && !lru_.empty()) {
    held -= lru_.back().snapshot->bytes();
    Evict(std::prev(lru_.end()));
  }
  lru_.push_front(
      {std::make_shared<const PrefixSnapshot>(std::move(snapshot)), hash});
  by_hash_.emplace(hash, lru_.begin());
  ++lengths_[len];
  if (on_insert_) on_insert_(lru_.front().snapshot);
  std::lock_guard<std::mutex> lock(stats_mu_);
  stats_.bytes += bytes;
  ++stats_.snapshots;
  ++stats_.inserted;
  return true;
}

void PrefixCache::Evict(Lru::iterator it) {
  auto [first, last] = by_hash_.equal_range(it->hash);
  for (auto h = first; h != last; ++h) {
    if (h->second == it) {
      by_hash_.erase(h);
      break;
    }
  }
  const size_t len = it->snapshot->tokens.size();
  if (--lengths_[len] == 0) lengths_.erase(len);
  const int64_t bytes = it->snapshot->bytes();
  if (on_evict_) on_evict_(it->snapshot);
  lru_.erase(it);  // a request still copying from it keeps its shared_ptr
  std::lock_guard<std::mutex> lock(stats_mu_);
  stats_.bytes -= bytes;
  --stats_.snapshots;
  ++stats_.evicted;
}

bool PrefixCache::EvictLru() {
  if (lru_.empty()) return false;
  Evict(std::prev(lru_.end()));
  return true;
}

bool PrefixCache::Contains(const std::vector<int32_t>& tokens,
                           const std::string& scope) const {
  return Find(tokens, tokens.size(), scope,
              PrefixHashOf(scope, tokens, tokens.size())) != lru_.end();
}

PrefixCacheStats PrefixCache::Stats() const {
  std::lock_guard<std::mutex> lock(stats_mu_);
  return stats_;
}

}  // namespace seqboat
