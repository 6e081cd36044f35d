#include "engine/state/arena_budget.h"

#include <algorithm>
#include <limits>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace seqboat {

int64_t SlotsThatFit(int64_t bytes_per_slot, int64_t free_bytes,
                     int64_t reserve_bytes) {
  if (bytes_per_slot <= 0) return std::numeric_limits<int64_t>::max();
  const int64_t usable = free_bytes - reserve_bytes;
  return usable <= 0 ? 0 : usable / bytes_per_slot;
}

absl::Status CheckArenaFits(int64_t bytes_per_slot, int max_slots,
                            int64_t free_bytes, int64_t reserve_bytes,
                            const std::string& device) {
  const int64_t fit = SlotsThatFit(bytes_per_slot, free_bytes, reserve_bytes);
  if (fit >= max_slots) return absl::OkStatus();
  return absl::ResourceExhaustedError(absl::StrCat(
      "the state arena needs ", max_slots, " slots x ",
      HumanBytes(bytes_per_slot), " = ", HumanBytes(bytes_per_slot * max_slots),
      " but ", device, " has ", HumanBytes(free_bytes), " free (",
      HumanBytes(reserve_bytes), " kept for activations and workspaces); ",
      fit > 0 ? absl::StrCat("--max_slots=", fit, " fits")
              : std::string("not even one slot fits")));
}

std::string HumanBytes(int64_t bytes) {
  const double b = static_cast<double>(bytes);
  if (bytes >= (int64_t{1} << 30))
    return absl::StrFormat("%.2f GiB", b / (1 << 30));
  if (bytes >= (int64_t{1} << 20))
    return absl::StrFormat("%.1f MiB", b / (1 << 20));
  if (bytes >= (int64_t{1} << 10))
    return absl::StrFormat("%.1f KiB", b / (1 << 10));
  return absl::StrCat(bytes, " B");
}

}  // namespace seqboat
