// Penalised-id lists that persist from draw to draw in a backend's memory
// (SampleRowsParams::table): each Sampler keeps its seen ids, its
// (id, count) pairs and its suppressed ids in lists of one flat int32 table
// and, at each draw, writes only what changed since its last one (a new id,
// a count, the suppressed ids when they changed), so the host work and the
// upload per step do not grow with a request's history. PenaltyTables is the
// host's book of that table: where each list lies and the writes of the
// launch being described. The backend holds the values.
//
// Lists get power-of-two rooms (at least 16 ints) that are reused once their
// sampler is gone or moved on to a larger room, so the table holds about
// twice the live lists (a list holds at most min(vocab, context) ids).
// Reusing a room at once is safe because the backend applies a launch's
// writes after every launch before it read the table (stream order on a
// device; a host backend samples at the call). Engine thread only.
#ifndef SEQBOAT_ENGINE_BACKEND_PENALTY_TABLE_H_
#define SEQBOAT_ENGINE_BACKEND_PENALTY_TABLE_H_

#include <cstdint>
#include <vector>

#include "absl/status/status.h"
#include "engine/backend/sample_row.h"

namespace seqboat {

class PenaltyTables {
 public:
  // A list's room: table[offset, offset + capacity).
  struct Room {
    int32_t offset = 0;
    int32_t capacity = 0;
  };

  // A room for at least n ints (n > 0).
  Room Allocate(int32_t n);
  // Gives a room back; later launches may write it.
  void Free(Room room);

  // Starts the writes of a new launch (the last launch's are dropped).
  void BeginLaunch() { writes_.clear(); }
  void Write(int32_t index, int32_t value) {
    writes_.push_back(index);
    writes_.push_back(value);
  }
  // What a launch's SampleRowsParams::table carries: its rows index the
  // table (a table that holds nothing yet still has one int).
  PenaltyTableUpdate update() const {
    return {size_ > 0 ? size_ : 1, writes_.data(),
            static_cast<int32_t>(writes_.size() / 2)};
  }
  // Ints written since BeginLaunch (pairs of the update).
  int32_t writes() const { return static_cast<int32_t>(writes_.size() / 2); }
  // The table's length: every room lies below it.
  int32_t size() const { return size_; }
  // Ints in rooms now held by lists.
  int64_t held() const { return held_; }

 private:
  int32_t size_ = 0;
  int64_t held_ = 0;
  std::vector<std::vector<int32_t>> free_;  // free offsets by log2(capacity)
  std::vector<int32_t> writes_;             // (index, value) pairs
};

// A Sampler's lists in a PenaltyTables and how much of each the backend's
// table already holds. A copy starts unbound (it writes its lists anew on
// its first draw); a move takes the rooms along; destruction frees them.
struct PenaltyTableLease {
  PenaltyTableLease() = default;
  PenaltyTableLease(const PenaltyTableLease&) {}
  PenaltyTableLease& operator=(const PenaltyTableLease& other);
  PenaltyTableLease(PenaltyTableLease&& other) noexcept;
  PenaltyTableLease& operator=(PenaltyTableLease&& other) noexcept;
  ~PenaltyTableLease() { Release(); }
  // Frees the rooms and forgets what was written.
  void Release();

  PenaltyTables* tables = nullptr;  // null: nothing written anywhere
  PenaltyTables::Room seen, counted, suppressed;
  int32_t seen_written = 0;     // ids of the seen list in the table
  int32_t counted_written = 0;  // (id, count) pairs in the table
  // Pairs already written whose count changed since (their positions).
  std::vector<int32_t> recounted;
  bool suppressed_changed = false;
};

// For backends whose table is host memory: grows *table to p.table.size
// (keeping its values) and applies the writes in order. Fails, naming the
// problem, on a negative size, a write outside the table, or a row whose
// lists reach past it.
absl::Status ApplyPenaltyTableUpdate(const SampleRowsParams& p,
                                     std::vector<int32_t>* table);

}  // namespace seqboat

#endif  // SEQBOAT_ENGINE_BACKEND_PENALTY_TABLE_H_
