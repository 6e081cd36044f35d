// The hash prefix snapshots are found by, in memory (PrefixCache) and on disk
// (SnapshotDisk): FNV-1a over the scope and the token bytes, mixed with the
// prefix length so equal hashes of different lengths do not share a bucket
// chain. Collisions are harmless: every candidate is compared token by token.
#ifndef SEQBOAT_ENGINE_STATE_PREFIX_HASH_H_
#define SEQBOAT_ENGINE_STATE_PREFIX_HASH_H_

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace seqboat {

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
  // The hash of the `len` tokens added so far.
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

inline uint64_t PrefixHashOf(const std::string& scope,
                             const std::vector<int32_t>& tokens, size_t len) {
  PrefixHasher h(scope);
  for (size_t i = 0; i < len; ++i) h.Add(tokens[i]);
  return h.Value(len);
}

// For each length in `lengths` (ascending) up to max_len, the hash of
// (scope, tokens[0, length)), in one pass over the tokens.
template <typename LengthMap>
std::vector<std::pair<size_t, uint64_t>> PrefixCandidates(
    const std::string& scope, const std::vector<int32_t>& tokens,
    size_t max_len, const LengthMap& lengths) {
  std::vector<std::pair<size_t, uint64_t>> out;
  PrefixHasher h(scope);
  auto next = lengths.begin();
  for (size_t i = 0; i <= max_len && next != lengths.end(); ++i) {
    if (i == next->first) {
      out.emplace_back(i, h.Value(i));
      ++next;
    }
    if (i < max_len) h.Add(tokens[i]);
  }
  return out;
}

}  // namespace seqboat

#endif  // SEQBOAT_ENGINE_STATE_PREFIX_HASH_H_
