// Snapshots of whole sequence states, keyed by the exact tokens they have
// consumed, so a request whose prompt extends an earlier one (the next turn of
// a chat) resumes from that state and prefills only the rest. Every layer's
// state per sequence is fixed-size (SlotArena), so a snapshot is one slot's
// bytes however long the history: a hit costs a copy, not a prefill.
//
// Lookup finds the longest cached prefix of a prompt: prefix hashes select
// the candidates, and a candidate is only returned when its tokens equal the
// prompt's (a hash alone never decides). Entries are immutable once inserted
// (handed out as shared_ptr<const>), so requests sharing one prefix each copy
// it into their own slot. Memory is bounded by a byte budget with LRU
// eviction; a budget of 0 disables the cache. Every snapshot belongs to a
// scope (a tenant's partition): a lookup finds only its own scope's, the
// scope seeds the hash and is compared with the tokens, so scopes never
// share a snapshot even on a hash collision.
//
// An evicted snapshot is handed to an observer (the disk tier, which writes
// it out) before the cache lets go of it.
//
// Not thread-safe except Stats(): the engine thread owns it.
#ifndef SEQBOAT_ENGINE_STATE_PREFIX_CACHE_H_
#define SEQBOAT_ENGINE_STATE_PREFIX_CACHE_H_

#include <cstdint>
#include <functional>
#include <list>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

namespace seqboat {

struct PrefixSnapshot {
  std::string scope;            // who may resume from it (Request::cache_scope)
  std::vector<int32_t> tokens;  // exactly what the state has consumed
  // One slot's state (SlotArena), in a host block the backend copies to and
  // from off its op stream (HostBlockPool); immutable once inserted.
  std::shared_ptr<const uint8_t> state;
  int64_t state_bytes = 0;
  int64_t bytes() const {
    return static_cast<int64_t>(tokens.size() * sizeof(int32_t) +
                                scope.size()) +
           state_bytes;
  }
};

struct PrefixCacheStats {
  int64_t budget_bytes = 0;
  int64_t bytes = 0;  // held by snapshots (state and tokens)
  int64_t snapshots = 0;
  int64_t queries = 0;  // prompt tokens looked up (vLLM's queries_total)
  int64_t hits = 0;     // of those, tokens served from a snapshot
  int64_t inserted = 0;
  int64_t evicted = 0;
};

class PrefixCache {
 public:
  explicit PrefixCache(int64_t budget_bytes);

  bool enabled() const { return budget_bytes_ > 0; }

  // The longest snapshot of `scope` whose tokens are a prefix of `prompt` and
  // no longer than `max_len`, or nullptr. Counts prompt.size() queried tokens
  // and the returned snapshot's length as hits; marks it most recently used.
  std::shared_ptr<const PrefixSnapshot> Lookup(
      const std::vector<int32_t>& prompt, size_t max_len,
      const std::string& scope = "");

  // Adds a snapshot (tokens must be non-empty), evicting the least recently
  // used ones to stay within the budget. A snapshot with the same tokens
  // and scope already held is only marked used; one larger than the budget is
  // dropped. Returns whether the snapshot is held afterwards.
  bool Insert(PrefixSnapshot snapshot);

  // The length of the snapshot Lookup would return (0: none); changes and
  // counts nothing.
  size_t MatchLength(const std::vector<int32_t>& prompt, size_t max_len,
                     const std::string& scope = "") const;

  // The snapshot Lookup would return, changing and counting nothing (an
  // export to another replica is no use of it here).
  std::shared_ptr<const PrefixSnapshot> Peek(
      const std::vector<int32_t>& prompt, size_t max_len,
      const std::string& scope = "") const;

  // Every snapshot held, most recently used first (a drain writes them out).
  std::vector<std::shared_ptr<const PrefixSnapshot>> Snapshots() const;

  // Called with each snapshot as it is evicted, on the thread that evicts;
  // it must not block.
  void set_on_evict(
      std::function<void(std::shared_ptr<const PrefixSnapshot>)> on_evict) {
    on_evict_ = std::move(on_evict);
  }

  // Called with each new snapshot as it is inserted (a disk tier written
  // through); it must not block.
  void set_on_insert(
      std::function<void(std::shared_ptr<const PrefixSnapshot>)> on_insert) {
    on_insert_ = std::move(on_insert);
  }

  // Evicts the least recently used snapshot; false when none is held.
  bool EvictLru();

  // Whether `tokens` exactly are held in `scope` (for tests and for
  // skipping a copy).
  bool Contains(const std::vector<int32_t>& tokens,
                const std::string& scope = "") const;

  PrefixCacheStats Stats() const;

 private:
  struct Entry {
    std::shared_ptr<const PrefixSnapshot> snapshot;
    uint64_t hash = 0;
  };
  using Lru = std::list<Entry>;  // front: most recently used

  Lru::iterator Find(const std::vector<int32_t>& tokens, size_t len,
                     const std::string& scope, uint64_t hash) const;
  Lru::iterator FindLongest(const std::vector<int32_t>& prompt, size_t max_len,
                            const std::string& scope) const;
  void Evict(Lru::iterator it);

  const int64_t budget_bytes_;
  mutable Lru lru_;
  // Hash of (scope, length, the first `length` tokens) -> entries; verified
  // on use.
  std::unordered_multimap<uint64_t, Lru::iterator> by_hash_;
  // How many entries have each length: the lengths a lookup tries.
  std::map<size_t, int> lengths_;
  std::function<void(std::shared_ptr<const PrefixSnapshot>)> on_evict_;
  std::function<void(std::shared_ptr<const PrefixSnapshot>)> on_insert_;

  mutable std::mutex stats_mu_;
  PrefixCacheStats stats_;  // guarded by stats_mu_
};

}  // namespace seqboat

#endif  // SEQBOAT_ENGINE_STATE_PREFIX_CACHE_H_
