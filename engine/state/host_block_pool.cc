#include "engine/state/host_block_pool.h"

#include <utility>

#include "absl/strings/str_cat.h"

namespace seqboat {

absl::StatusOr<HostBlockPool> HostBlockPool::Create(Backend& backend,
                                                    int64_t block_bytes,
                                                    int64_t blocks) {
  if (block_bytes < 0 || blocks < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("host blocks: ", blocks, " of ", block_bytes, " bytes"));
  }
  auto shared = std::make_shared<Shared>();
  if (block_bytes == 0 || blocks == 0) {
    return HostBlockPool(std::move(shared), block_bytes, 0);
  }
  auto region = backend.AllocHost(static_cast<size_t>(block_bytes * blocks));
  if (!region.ok()) {
    return absl::ResourceExhaustedError(
        absl::StrCat("snapshot blocks: ", blocks, " x ", block_bytes,
                     " bytes; ", region.status().message()));
  }
  shared->region = *std::move(region);
  auto* base = static_cast<uint8_t*>(shared->region.get());
  // Handed out lowest first.
  for (int64_t i = blocks - 1; i >= 0; --i) {
    shared->free.push_back(base + i * block_bytes);
  }
  return HostBlockPool(std::move(shared), block_bytes, blocks);
}

std::shared_ptr<uint8_t> HostBlockPool::Take() {
  uint8_t* block = nullptr;
  {
    std::lock_guard<std::mutex> lock(shared_->mu);
    if (shared_->free.empty()) return nullptr;
    block = shared_->free.back();
    shared_->free.pop_back();
  }
  // The deleter holds the pool's memory until the block is back.
  return std::shared_ptr<uint8_t>(block, [shared = shared_](uint8_t* b) {
    std::lock_guard<std::mutex> lock(shared->mu);
    shared->free.push_back(b);
  });
}

int64_t HostBlockPool::free_blocks() const {
  std::lock_guard<std::mutex> lock(shared_->mu);
  return static_cast<int64_t>(shared_->free.size());
}

}  // namespace seqboat
