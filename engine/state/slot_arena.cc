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
  int64_t per_slot_total = 0;
  for (const SlotState* layer : layers)
    per_slot_total += layer->StateBytesPerSlot();
  if (const int64_t free_bytes = backend.FreeBytes(); free_bytes >= 0) {
    RETURN_IF_ERROR(CheckArenaFits(per_slot_total, max_slots, free_bytes,
                                   kArenaReserveBytes, backend.DeviceName()));
  }
  std::unique_ptr<SlotArena> arena(new SlotArena(backend, max_slots, layers));
  for (size_t i = 0; i < layers.size(); ++i) {
    const int64_t per_slot = layers[i]->StateBytesPerSlot();
    arena->region_bytes_.push_back(per_slot);
    arena->bytes_per_slot_ += per_slot;
    if (per_slot == 0) {
      arena->regions_.push_back(nullptr);
      continue;
    }
    auto region = backend.Alloc(static_cast<size_t>(per_slot) * max_slots);
    if (!region.ok()) {
      return absl::ResourceExhaustedError(
          absl::StrCat("state arena: block ", i, " (", layers[i]->kind(),
                       ") needs ", per_slot, " bytes x ", max_slots, " slots; ",
                       region.status().message()));
    }
    layers[i]->BindState(region->get());
    arena->regions_.push_back(*region);
  }
  return arena;
}

std::optional<int> SlotArena::Acquire() {
  if (free_.empty()) return std::nullopt;
  const int slot = free_.back();
  free_.pop_back();
  in_use_[slot] = true;
  for (SlotState* layer : layers_) {
    if (layer->StateBytesPerSlot() > 0) layer->ResetSlot(backend_, slot);
  }
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
  int64_t offset = 0;
  for (size_t i = 0; i < regions_.size(); ++i) {
    if (region_bytes_[i] == 0) continue;
    const auto* base = static_cast<const uint8_t*>(regions_[i].get());
    backend_.CopyToHost(out.data() + offset, base + region_bytes_[i] * slot,
                        region_bytes_[i]);
    offset += region_bytes_[i];
  }
  return out;
}

void SlotArena::Restore(int slot, const std::vector<uint8_t>& snapshot) {
  int64_t offset = 0;
  for (size_t i = 0; i < regions_.size(); ++i) {
    if (region_bytes_[i] == 0) continue;
    auto* base = static_cast<uint8_t*>(regions_[i].get());
    backend_.CopyToDevice(base + region_bytes_[i] * slot,
                          snapshot.data() + offset, region_bytes_[i]);
    offset += region_bytes_[i];
  }
}

}  // namespace seqboat
