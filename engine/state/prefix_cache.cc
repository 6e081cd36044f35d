#include "engine/state/prefix_cache.h"

#include <algorithm>
#include <utility>

namespace seqboat {
namespace {

// FNV-1a over the token bytes, mixed with the length so equal hashes of
// different lengths do not share a bucket chain. Collisions are harmless:
// every candidate is compared token by token.
class PrefixHasher {
 public:
  // Seeded by the scope: its bytes, then its length, before any token.
  explicit PrefixHasher(const std::string& scope) {
    for (char c : scope) Byte(static_cast<uint8_t>(c));
    Add(static_cast<int32_t>(scope.size()));
  }
  void Add(int32_t token) {
    uint32_t t = static_cast<uint32_t>(token);
    for (int i = 0; i < 4; ++i) Byte((t >> (8 * i)) & 0xffu);
  }
  uint64_t Value(size_t len) const {
    uint64_t x = h_ ^ (static_cast<uint64_t>(len) * 0x9e3779b97f4a7c15ull);
    x ^= x >> 31;
    return x * 0xbf58476d1ce4e5b9ull;
  }

 private:
  void Byte(uint32_t b) {
    h_ ^= b;
    h_ *= 1099511628211ull;
  }
  uint64_t h_ = 1469598103934665603ull;
};

uint64_t HashOf(const std::string& scope, const std::vector<int32_t>& tokens,
                size_t len) {
  PrefixHasher h(scope);
  for (size_t i = 0; i < len; ++i) h.Add(tokens[i]);
  return h.Value(len);
}

}  // namespace

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

std::shared_ptr<const PrefixSnapshot> PrefixCache::Lookup(
    const std::vector<int32_t>& prompt, size_t max_len,
    const std::string& scope) {
  std::shared_ptr<const PrefixSnapshot> found;
  if (enabled() && !lengths_.empty()) {
    max_len = std::min(max_len, prompt.size());
    // Hashes of every prefix length a snapshot has, in one pass.
    std::vector<std::pair<size_t, uint64_t>> candidates;
    PrefixHasher h(scope);
    auto next = lengths_.begin();
    for (size_t i = 0; i <= max_len && next != lengths_.end(); ++i) {
      if (i == next->first) {
        candidates.emplace_back(i, h.Value(i));
        ++next;
      }
      if (i < max_len) h.Add(prompt[i]);
    }
    for (auto c = candidates.rbegin(); c != candidates.rend(); ++c) {
      auto it = Find(prompt, c->first, scope, c->second);
      if (it != lru_.end()) {
        lru_.splice(lru_.begin(), lru_, it);
        found = it->snapshot;
        break;
      }
    }
  }
  std::lock_guard<std::mutex> lock(stats_mu_);
  stats_.queries += static_cast<int64_t>(prompt.size());
  if (found != nullptr)
    stats_.hits += static_cast<int64_t>(found->tokens.size());
  return found;
}

bool PrefixCache::Insert(PrefixSnapshot snapshot) {
  const size_t len = snapshot.tokens.size();
  if (!enabled() || len == 0 || snapshot.bytes() > budget_bytes_) return false;
  const uint64_t hash = HashOf(snapshot.scope, snapshot.tokens, len);
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
              HashOf(scope, tokens, tokens.size())) != lru_.end();
}

PrefixCacheStats PrefixCache::Stats() const {
  std::lock_guard<std::mutex> lock(stats_mu_);
  return stats_;
}

}  // namespace seqboat
