// What the slot arena needs of a holder of per-sequence state (a block of
// the layer stack): how many bytes one sequence takes and where its region
// is. Every holder's state before the first token is all zeros, so the arena
// clears a slot whole. Fixed-size state is what lets the arena be allocated
// once, before the first request.
#ifndef SEQBOAT_ENGINE_STATE_SLOT_STATE_H_
#define SEQBOAT_ENGINE_STATE_SLOT_STATE_H_

#include <cstdint>
#include <string>

#include "engine/backend/backend.h"

namespace seqboat {

class SlotState {
 public:
  virtual ~SlotState() = default;
  // For messages ("mamba1").
  virtual std::string kind() const = 0;
  // Bytes of state one sequence needs (0 if none).
  virtual int64_t StateBytesPerSlot() const = 0;
  // Gives the holder its state: slot s's StateBytesPerSlot() bytes at
  // base + s * slot_stride (the arena keeps each slot's state of every
  // holder together, so that a slot is copied whole in one piece).
  virtual void BindState(void* base, int64_t slot_stride) = 0;
};

}  // namespace seqboat

#endif  // SEQBOAT_ENGINE_STATE_SLOT_STATE_H_
