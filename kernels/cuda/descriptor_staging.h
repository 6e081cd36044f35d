// Where a step's host descriptor arrays (segments, token ids, row lists) sit
// in the backend's pinned staging buffer, whose device twin the kernels read.
//
// Equal contents are placed once per pass: layers hand the same segment array
// to op after op. Every placement is logged so that a recorded CUDA graph can
// be checked against a later step: a replay is valid only if that step places
// the same byte ranges at the same offsets. No CUDA here, so the policy is
// tested on machines without a GPU; the backend does the copies and syncs.
#ifndef SEQBOAT_KERNELS_CUDA_DESCRIPTOR_STAGING_H_
#define SEQBOAT_KERNELS_CUDA_DESCRIPTOR_STAGING_H_

#include <cstddef>
#include <cstdint>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"

namespace seqboat::cuda {

class DescriptorStaging {
 public:
  // Placements are 16-byte aligned so kernels may read them as vectors.
  static constexpr size_t kAlignment = 16;

  // `host` is the staging buffer of `capacity` bytes; not owned.
  DescriptorStaging(uint8_t* host, size_t capacity)
      : host_(host), capacity_(capacity) {}

  struct Placement {
    size_t offset = 0;
    // New contents, copied to host + offset: the caller uploads them. False
    // when an equal array was placed earlier in this pass.
    bool fresh = false;
  };
  // Places `bytes` (> 0) bytes of `src`. Errors: ResourceExhausted when the
  // array is larger than the whole buffer; Unavailable when this pass has
  // filled it (the caller waits until the device has read what was staged,
  // calls Rewind() and asks again, or fails the step if it is being
  // recorded).
  absl::StatusOr<Placement> Place(const void* src, size_t bytes);

  // Starts a new pass at offset 0 and clears the log. Everything placed must
  // have been consumed by the device.
  void Rewind();

  // (offset, bytes) of every Place() since the last Rewind(), repeats
  // included, in call order.
  using Log = std::vector<std::pair<size_t, size_t>>;
  const Log& log() const { return log_; }

  size_t capacity() const { return capacity_; }
  size_t used() const { return offset_; }

 private:
  struct Placed {
    size_t bytes;
    size_t offset;
  };
  uint8_t* host_;
  size_t capacity_;
  size_t offset_ = 0;
  std::vector<Placed> placed_;
  Log log_;
};

}  // namespace seqboat::cuda

#endif  // SEQBOAT_KERNELS_CUDA_DESCRIPTOR_STAGING_H_
