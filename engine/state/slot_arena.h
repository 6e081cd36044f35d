// The slot arena: every block's per-sequence state, allocated once at start-up
// as one [max_slots, bytes_per_slot] region in which a slot holds every
// block's state (each at an aligned offset), and the free list of slots. A
// sequence's whole state is one contiguous run of bytes: one copy to
// snapshot it, one to restore it. Admission counts slots, never pages: memory
// is known before the first request. Not thread-safe; the engine thread owns
// it.
#ifndef SEQBOAT_ENGINE_STATE_SLOT_ARENA_H_
#define SEQBOAT_ENGINE_STATE_SLOT_ARENA_H_

#include <cstdint>
#include <memory>
#include <optional>
#include <vector>

#include "absl/status/statusor.h"
#include "engine/backend/backend.h"
#include "engine/state/slot_state.h"

namespace seqboat {

class SlotArena {
 public:
  // Allocates and binds every holder's state region (one per block).
  // RESOURCE_EXHAUSTED, with the size asked for, when the backend cannot hold
  // it.
  static absl::StatusOr<std::unique_ptr<SlotArena>> Create(
      Backend& backend, int max_slots, const std::vector<SlotState*>& holders);

  // The lowest free slot with its state zeroed, or nullopt when all are taken.
  std::optional<int> Acquire();
  // Returns a slot; releasing a free or out-of-range slot is a no-op that
  // returns false (a double release must never hand one slot to two sequences).
  bool Release(int slot);

  int max_slots() const { return max_slots_; }
  int free_slots() const { return static_cast<int>(free_.size()); }
  int64_t bytes_per_slot() const { return bytes_per_slot_; }

  // A slot's whole state, copied to the host now (tests and tools).
  std::vector<uint8_t> Snapshot(int slot) const;

  // A slot's state into `host_dst` (bytes_per_slot bytes, from
  // Backend::AllocHost) and back, off the op stream (Backend's copies): the
  // copy sees every step launched before it, and until CopyDone no step may
  // run on the slot and the host side must stay.
  CopyTicket SnapshotAsync(int slot, void* host_dst);
  CopyTicket RestoreAsync(int slot, const void* host_src);
  bool CopyDone(CopyTicket ticket) { return backend_.CopyDone(ticket); }
  void WaitCopy(CopyTicket ticket) { backend_.WaitCopy(ticket); }
  // Slot `src`'s state into slot `dst`, in op order (a fork).
  void CopySlot(int dst, int src);

 private:
  // Each block's state starts at a multiple of this within its slot (vector
  // loads; the kernels' own alignment needs).
  static constexpr int64_t kAlignment = 256;

  uint8_t* SlotBase(int slot) const {
    return static_cast<uint8_t*>(region_.get()) + bytes_per_slot_ * slot;
  }

  SlotArena(Backend& backend, int max_slots, std::vector<SlotState*> holders);

  Backend& backend_;
  int max_slots_;
  std::vector<SlotState*> layers_;
  DeviceBuffer region_;           // [max_slots, bytes_per_slot_]
  std::vector<int64_t> offsets_;  // each layer's state within a slot
  std::vector<bool> in_use_;
  std::vector<int> free_;  // kept sorted descending: back() is the lowest
  int64_t bytes_per_slot_ = 0;
};

}  // namespace seqboat

#endif  // SEQBOAT_ENGINE_STATE_SLOT_ARENA_H_
