#include "engine/state/slot_arena.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "engine/state/arena_budget.h"

namespace seqboat {

SlotArena::SlotArena(Backend& backend, int max_slots,
                     std::vector<SlotState*> layers)
    : backend_(backend), max_slots_(max_slots), layers_(std::move(layers)) {
  in_use_.assign(max_slots, false);
  for (int s = max_slots - 1; s >= 0; --s) free_.push_back(s);
}

absl::StatusOr<std::unique_ptr<SlotArena>> SlotArena::Create(
    Backend& backend, int max_slots, const std::vector<SlotState*>& layers) {
  if (max_slots <= 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("max_slots must be > 0, got ", max_slots));
  }
  // A slot holds every layer's state, each at an aligned offset, so that
  // one copy moves a sequence's whole state.
  std::unique_ptr<SlotArena> arena(new SlotArena(backend, max_slots, layers));
  int64_t per_slot = 0;
  for (const SlotState* layer : layers) {
    const int64_t bytes = layer->StateBytesPerSlot();
    arena->offsets_.push_back(per_slot);
    per_slot += (bytes + kAlignment - 1) / kAlignment * kAlignment;
  }
  arena->bytes_per_slot_ = per_slot;
  if (const int64_t free_bytes = backend.FreeBytes(); free_bytes >= 0) {
    RETURN_IF_ERROR(CheckArenaFits(per_slot, max_slots, free_bytes,
                                   kArenaReserveBytes, backend.DeviceName()));
  }
  if (per_slot == 0) return arena;
  auto region = backend.Alloc(static_cast<size_t>(per_slot) * max_slots);
  if (!region.ok()) {
    return absl::ResourceExhaustedError(
        absl::StrCat("state arena: ", per_slot, " bytes per slot x ", max_slots,
                     " slots; ", region.status().message()));
  }
  arena->region_ = *region;
  // The padding between blocks is never written again: zero, so snapshots are
  // deterministic bytes.
  backend.Zero(arena->region_.get(), static_cast<size_t>(per_slot) * max_slots);
  auto* base = static_cast<uint8_t*>(arena->region_.get());
  for (size_t i = 0; i < layers.size(); ++i) {
    if (layers[i]->StateBytesPerSlot() > 0) {
      layers[i]->BindState(base + arena->offsets_[i], per_slot);
    }
  }
  return arena;
}

std::optional<int> SlotArena::Acquire() {
  if (free_.empty()) return std::nullopt;
  const int slot = free_.back();
  free_.pop_back();
  in_use_[slot] = true;
  // Every block's state and the padding between them, in one clear.
  if (bytes_per_slot_ > 0) backend_.Zero(SlotBase(slot), bytes_per_slot_);
  return slot;
}

bool SlotArena::Release(int slot) {
  if (slot < 0 || slot >= max_slots_ || !in_use_[slot]) return false;
  in_use_[slot] = false;
  free_.insert(
      std::upper_bound(free_.begin(), free_.end(), slot, std::greater<int>()),
      slot);
  return true;
}

std::vector<uint8_t> SlotArena::Snapshot(int slot) const {
  std::vector<uint8_t> out(bytes_per_slot_);
  if (bytes_per_slot_ > 0) {
    backend_.CopyToHost(out.data(), SlotBase(slot), bytes_per_slot_);
  }
  return out;
}

CopyTicket SlotArena::SnapshotAsync(int slot, void* host_dst) {
  if (bytes_per_slot_ == 0) return 0;
  return backend_.CopyToHostAsync(host_dst, SlotBase(slot), bytes_per_slot_);
}

CopyTicket SlotArena::RestoreAsync(int slot, const void* host_src) {
  if (bytes_per_slot_ == 0) return 0;
  return backend_.CopyToDeviceAsync(SlotBase(slot), host_src, bytes_per_slot_);
}

void SlotArena::CopySlot(int dst, int src) {
  if (bytes_per_slot_ > 0 && dst != src) {
    backend_.CopyOnDevice(SlotBase(dst), SlotBase(src), bytes_per_slot_);
  }
}

}  // namespace seqboat
