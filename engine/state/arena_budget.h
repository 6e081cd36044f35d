// Sizing the state arena against the memory a device has free, before
// allocating it, so a too-large --max_slots fails at start-up with the number
// that would fit instead of an allocator error deep in the load.
#ifndef SEQBOAT_ENGINE_STATE_ARENA_BUDGET_H_
#define SEQBOAT_ENGINE_STATE_ARENA_BUDGET_H_

#include <cstdint>
#include <string>

#include "absl/status/status.h"

namespace seqboat {

// Memory kept back for what is allocated after the arena (step activations,
// GEMM and cuBLAS workspaces, recorded graphs).
inline constexpr int64_t kArenaReserveBytes = int64_t{256} << 20;

// The most slots of bytes_per_slot that fit in free_bytes - reserve_bytes
// (0 if none; every slot count fits when bytes_per_slot is 0).
int64_t SlotsThatFit(int64_t bytes_per_slot, int64_t free_bytes,
                     int64_t reserve_bytes);

// OK when max_slots fit; RESOURCE_EXHAUSTED otherwise, naming what the arena
// needs, what is free on `device` and the largest --max_slots that fits.
absl::Status CheckArenaFits(int64_t bytes_per_slot, int max_slots,
                            int64_t free_bytes, int64_t reserve_bytes,
                            const std::string& device);

// "1.5 GiB", "18.2 MiB", "512 B".
std::string HumanBytes(int64_t bytes);

}  // namespace seqboat

#endif  // SEQBOAT_ENGINE_STATE_ARENA_BUDGET_H_
