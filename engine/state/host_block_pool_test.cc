#include "engine/state/host_block_pool.h"

#include <cstring>
#include <memory>
#include <set>
#include <thread>

#include "gtest/gtest.h"
#include "kernels/cpu/cpu_backend.h"

namespace seqboat {
namespace {

TEST(HostBlockPoolTest, HandsOutDistinctBlocksUntilAllAreHeld) {
  auto cpu = MakeCpuBackend(1);
  auto pool = HostBlockPool::Create(*cpu, 100, 3);
  ASSERT_TRUE(pool.ok()) << pool.status();
  std::set<uint8_t*> seen;
  std::vector<std::shared_ptr<uint8_t>> held;
  for (int i = 0; i < 3; ++i) {
    held.push_back(pool->Take());
    ASSERT_NE(held.back(), nullptr);
    std::memset(held.back().get(), i, 100);  // the whole block is writable
    seen.insert(held.back().get());
  }
  EXPECT_EQ(seen.size(), 3u);
  for (uint8_t* a : seen) {
    for (uint8_t* b : seen) {
      if (a < b) EXPECT_GE(b - a, 100);  // blocks do not overlap
    }
  }
  EXPECT_EQ(pool->Take(), nullptr);
  EXPECT_EQ(pool->free_blocks(), 0);
  // A block comes back when its last holder lets go, not before.
  std::shared_ptr<uint8_t> second = held[1];
  held[1].reset();
  EXPECT_EQ(pool->free_blocks(), 0);
  second.reset();
  EXPECT_EQ(pool->free_blocks(), 1);
  EXPECT_NE(pool->Take(), nullptr);
}

TEST(HostBlockPoolTest, BlocksOutliveThePoolAndComeBackFromOtherThreads) {
  auto cpu = MakeCpuBackend(1);
  std::shared_ptr<uint8_t> kept;
  {
    auto pool = HostBlockPool::Create(*cpu, 64, 2);
    ASSERT_TRUE(pool.ok());
    kept = pool->Take();
    std::shared_ptr<uint8_t> other = pool->Take();
    std::thread([b = std::move(other)]() mutable { b.reset(); }).join();
    EXPECT_EQ(pool->free_blocks(), 1);
  }
  kept.get()[63] = 7;  // still the pool's memory
  EXPECT_EQ(kept.get()[63], 7);
}

TEST(HostBlockPoolTest, AnEmptyPoolHandsOutNothing) {
  auto cpu = MakeCpuBackend(1);
  for (auto [bytes, blocks] : {std::pair<int64_t, int64_t>{0, 4}, {64, 0}}) {
    auto pool = HostBlockPool::Create(*cpu, bytes, blocks);
    ASSERT_TRUE(pool.ok());
    EXPECT_EQ(pool->Take(), nullptr);
  }
  EXPECT_FALSE(HostBlockPool::Create(*cpu, -1, 2).ok());
}

}  // namespace
}  // namespace seqboat
