#include "kernels/cuda/descriptor_staging.h"

#include <cstring>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace seqboat::cuda {

absl::StatusOr<DescriptorStaging::Placement> DescriptorStaging::Place(
    const void* src, size_t bytes) {
  const size_t aligned = (bytes + kAlignment - 1) & ~(kAlignment - 1);
  if (bytes == 0) {
    return absl::InvalidArgumentError("empty descriptor array");
  }
  if (aligned > capacity_) {
    return absl::ResourceExhaustedError(
        absl::StrCat("descriptor array of ", bytes, " bytes does not fit the ",
                     capacity_, "-byte staging buffer"));
  }
  // Matched on content alone: a temporary's address may or may not repeat.
  // Should a recording and a later step match differently, their logs differ
  // and the backend runs that step without the recording.
  for (const Placed& p : placed_) {
    if (p.bytes == bytes && std::memcmp(host_ + p.offset, src, bytes) == 0) {
      log_.emplace_back(p.offset, bytes);
      return Placement{p.offset, false};
    }
  }
  if (offset_ + aligned > capacity_) {
    return absl::UnavailableError(
        absl::StrCat("descriptor staging buffer full: ", offset_, " of ",
                     capacity_, " bytes used, ", bytes, " more asked"));
  }
  const size_t off = offset_;
  offset_ += aligned;
  std::memcpy(host_ + off, src, bytes);
  placed_.push_back({bytes, off});
  log_.emplace_back(off, bytes);
  return Placement{off, true};
}

void DescriptorStaging::Rewind() {
  offset_ = 0;
  placed_.clear();
  log_.clear();
}

}  // namespace seqboat::cuda
