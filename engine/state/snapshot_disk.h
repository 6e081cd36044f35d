// The prefix cache's second tier: snapshots evicted from memory, kept as
// files (engine/state/snapshot_file.h) in one directory under a byte budget,
// found again by the same exact-token lookup as in memory, and found again
// by a restarted process: Open scans the directory and indexes every file
// of this model's identity, refusing (deleting and counting) the rest.
//
// Nothing here runs on the caller's thread but index lookups: Write queues a
// snapshot for the writer thread (bounded; a full queue drops the snapshot
// and counts it) and ReadAsync queues a read for the reader thread, whose
// callback runs there. Read reads on the caller's thread. Files are evicted
// least recently used (written or read) first; a file being read when it is
// evicted stays readable to that reader (POSIX unlink). A file that fails
// its checksum or is short when read is deleted, counted and not served.
// Thread-safe.
#ifndef SEQBOAT_ENGINE_STATE_SNAPSHOT_DISK_H_
#define SEQBOAT_ENGINE_STATE_SNAPSHOT_DISK_H_

#include <array>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <list>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include "absl/status/statusor.h"
#include "engine/state/prefix_cache.h"
#include "engine/state/snapshot_file.h"

namespace seqboat {

struct SnapshotDiskOptions {
  std::string dir;           // created if missing
  int64_t budget_bytes = 0;  // the files' total size; > 0
  // The model's identity (layer kinds, state layout, weights, config): a
  // file of another identity is refused.
  uint64_t identity = 0;
  int64_t state_bytes = 0;  // one slot's state, what every file holds
  int32_t queue_depth = 4;  // snapshots waiting for the writer
};

struct SnapshotDiskStats {
  int64_t budget_bytes = 0;
  int64_t bytes = 0;  // held by files
  int64_t files = 0;
  int64_t hits = 0;        // snapshots read back and served
  int64_t hit_tokens = 0;  // their tokens
  int64_t read_bytes = 0;
  int64_t writes = 0;  // files written
  int64_t written_bytes = 0;
  int64_t dropped = 0;  // not written: the queue was full
  int64_t write_errors = 0;
  int64_t evicted = 0;  // files deleted to stay within the budget
  // Files refused, by SnapshotRefusal (index 0 unused).
  std::array<int64_t, kSnapshotRefusalKinds> refused{};
};

class SnapshotDisk {
 public:
  // Creates the directory if needed, deletes leftover temporary files,
  // indexes the snapshot files (oldest modified first out), refusing the
  // ones that are not this identity's, and starts the threads.
  static absl::StatusOr<std::unique_ptr<SnapshotDisk>> Open(
      SnapshotDiskOptions options);
  // Writes what is queued, then stops.
  ~SnapshotDisk();

  // Queues `snap` for writing; false (counted as dropped) when the queue is
  // full, unless `wait`, which waits for room. A snapshot already on disk
  // is only marked used.
  bool Write(std::shared_ptr<const PrefixSnapshot> snap, bool wait = false);
  // Waits until every queued snapshot is written.
  void Flush();

  // The length of the longest file of `scope` whose tokens are a prefix of
  // `prompt`, longer than `min_len` and at most `max_len`; 0 if none.
  size_t MatchLength(const std::vector<int32_t>& prompt, size_t max_len,
                     const std::string& scope, size_t min_len = 0) const;

  // Reads the file of `scope` and exactly `tokens` into `state` (room for
  // state_bytes): NOT_FOUND if there is none (or it went meanwhile),
  // DATA_LOSS if it was refused (and deleted).
  absl::Status Read(const std::vector<int32_t>& tokens,
                    const std::string& scope, uint8_t* state);
  // Read on the reader thread; `done` runs there.
  void ReadAsync(std::vector<int32_t> tokens, std::string scope,
                 std::shared_ptr<uint8_t> state,
                 std::function<void(absl::Status)> done);

  SnapshotDiskStats Stats() const;
  const SnapshotDiskOptions& options() const { return options_; }

 private:
  struct Entry {
    uint64_t hash = 0;
    std::string scope;
    std::vector<int32_t> tokens;
    int64_t file_bytes = 0;
  };
  using Lru = std::list<Entry>;  // front: most recently used
  struct ReadJob {
    std::vector<int32_t> tokens;
    std::string scope;
    std::shared_ptr<uint8_t> state;
    std::function<void(absl::Status)> done;
  };

  explicit SnapshotDisk(SnapshotDiskOptions options);
  absl::Status Scan();
  void WriterLoop();
  void ReaderLoop();
  void WriteOne(const PrefixSnapshot& snap);
  std::string PathOf(uint64_t hash, size_t len) const;
  // mu_ held for all below.
  Lru::iterator FindLocked(const std::vector<int32_t>& tokens, size_t len,
                           const std::string& scope, uint64_t hash) const;
  void IndexLocked(Entry entry);
  void DropLocked(Lru::iterator it);  // from the index only
  void Refuse(const std::string& path, SnapshotRefusal why);

  const SnapshotDiskOptions options_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  mutable Lru lru_;
  std::unordered_multimap<uint64_t, Lru::iterator> by_hash_;
  std::map<size_t, int> lengths_;
  std::deque<std::shared_ptr<const PrefixSnapshot>> writes_;
  bool writing_ = false;  // the writer holds one taken off writes_
  std::deque<ReadJob> reads_;
  bool stopping_ = false;
  SnapshotDiskStats stats_;
  std::thread writer_, reader_;
};

}  // namespace seqboat

#endif  // SEQBOAT_ENGINE_STATE_SNAPSHOT_DISK_H_
