// Where an engine asks other replicas for a prefix snapshot it lacks: the
// server's gRPC client of its peers (server/snapshot_peer_client.h)
// implements it, the scheduler calls it at admission and imports what it
// returns. The bytes are a snapshot file's (snapshot_file.h), so the importer
// checks them as it checks a file: identity, state size, length, checksum.
#ifndef SEQBOAT_ENGINE_STATE_SNAPSHOT_PEERS_H_
#define SEQBOAT_ENGINE_STATE_SNAPSHOT_PEERS_H_

#include <array>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "engine/state/snapshot_file.h"

namespace seqboat {

// One question to the peers: the longest snapshot of `scope` whose tokens
// are a prefix of `tokens` and longer than `min_tokens`.
struct PeerFetch {
  std::string scope;
  std::vector<int32_t> tokens;
  int64_t min_tokens = 0;
  // The largest answer that can be right (the file of all of `tokens`):
  // anything longer is refused unread.
  int64_t max_bytes = 0;
};

class SnapshotPeers {
 public:
  virtual ~SnapshotPeers() = default;
  // Asks the peers without blocking the caller; `done` runs exactly once,
  // on a thread of the implementation's, with a snapshot file's bytes,
  // NOT_FOUND when no peer has one, or another error (peers down, past the
  // deadline, too many fetches in flight). It must not block long.
  virtual void FetchAsync(
      PeerFetch fetch,
      std::function<void(absl::StatusOr<std::string>)> done) = 0;
};

// An engine's fetches from its peers, since start.
struct PeerFetchStats {
  int64_t fetches = 0;     // asked
  int64_t hits = 0;        // imported into the prefix cache
  int64_t hit_tokens = 0;  // their tokens
  int64_t bytes = 0;       // the bytes of the snapshots received
  int64_t misses = 0;      // no peer had a longer snapshot
  int64_t failed = 0;      // no answer: peers down, slow, or too busy
  // Answers refused by the import's checks, by SnapshotRefusal (index 0
  // unused).
  std::array<int64_t, kSnapshotRefusalKinds> refused{};
};

}  // namespace seqboat

#endif  // SEQBOAT_ENGINE_STATE_SNAPSHOT_PEERS_H_
