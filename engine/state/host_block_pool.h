// Fixed-size host blocks for slot snapshots, in one allocation the backend
// can copy to and from off its op stream (Backend::AllocHost: pinned memory
// on CUDA, where pinning per snapshot would cost more than the copy). A
// block goes back to the pool when its last holder (the prefix cache, a
// sequence restoring from it, a copy in flight) lets go, on whichever
// thread; the pool's memory lives until the last block has gone back.
#ifndef SEQBOAT_ENGINE_STATE_HOST_BLOCK_POOL_H_
#define SEQBOAT_ENGINE_STATE_HOST_BLOCK_POOL_H_

#include <cstdint>
#include <memory>
#include <mutex>
#include <vector>

#include "absl/status/statusor.h"
#include "engine/backend/backend.h"

namespace seqboat {

class HostBlockPool {
 public:
  // `blocks` blocks of `block_bytes` (either may be 0: a pool that never
  // hands one out). RESOURCE_EXHAUSTED, with the size, when the backend
  // cannot allocate them.
  static absl::StatusOr<HostBlockPool> Create(Backend& backend,
                                              int64_t block_bytes,
                                              int64_t blocks);

  // A free block, or null when every block is held.
  std::shared_ptr<uint8_t> Take();

  int64_t block_bytes() const { return block_bytes_; }
  int64_t blocks() const { return blocks_; }
  int64_t free_blocks() const;

 private:
  struct Shared {
    HostBuffer region;
    std::mutex mu;
    std::vector<uint8_t*> free;  // guarded by mu
  };
  HostBlockPool(std::shared_ptr<Shared> shared, int64_t block_bytes,
                int64_t blocks)
      : shared_(std::move(shared)),
        block_bytes_(block_bytes),
        blocks_(blocks) {}

  std::shared_ptr<Shared> shared_;
  int64_t block_bytes_ = 0;
  int64_t blocks_ = 0;
};

}  // namespace seqboat

#endif  // SEQBOAT_ENGINE_STATE_HOST_BLOCK_POOL_H_
