#include "server/idle_trim.h"

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "base/sanitizers.h"
#include "gtest/gtest.h"

namespace seqboat {
namespace {

TEST(IdleTrimmerTest, TrimsOnlyWhenIdleAndGrownPastTheSlack) {
  int64_t rss = 100;
  int trims = 0;
  IdleTrimmer::Hooks hooks;
  hooks.rss_bytes = [&rss] { return rss; };
  hooks.trim = [&] {
    ++trims;
    rss = 110;  // what the trim gave back
  };
  IdleTrimmer trimmer(hooks, /*slack_bytes=*/50);
  EXPECT_FALSE(trimmer.Poll(true));  // nothing grew
  rss = 400;
  EXPECT_FALSE(trimmer.Poll(false));  // busy: never while serving
  EXPECT_EQ(trims, 0);
  EXPECT_TRUE(trimmer.Poll(true));
  EXPECT_EQ(trims, 1);
  // The floor is now 110: growth within the slack does not trim again.
  rss = 150;
  EXPECT_FALSE(trimmer.Poll(true));
  rss = 161;
  EXPECT_TRUE(trimmer.Poll(true));
  EXPECT_EQ(trims, 2);
}

TEST(IdleTrimmerTest, TheDefaultTrimReturnsFreedHeap) {
  // A sanitizer's allocator is not glibc's, which malloc_trim trims.
  if (kSanitizerBuild) GTEST_SKIP() << "malloc is the sanitizer's";
  const int64_t before = ResidentBytes();
  ASSERT_GT(before, 0);
  // Mid-sized blocks (below the mmap threshold, so in the heap), touched,
  // and a small block after them that pins the top of the heap: once the
  // blocks are freed glibc keeps their pages, as after a burst of requests.
  std::vector<void*> blocks;
  for (int i = 0; i < 4096; ++i) {
    void* p = std::malloc(64 * 1024);
    std::memset(p, 1, 64 * 1024);
    blocks.push_back(p);
  }
  void* pin = std::malloc(64);
  for (void* p : blocks) std::free(p);
  const int64_t held = ResidentBytes();
  // glibc gives some back on its own (free() trims the arenas' tops); what
  // is left above the pin is what a burst leaves behind.
  ASSERT_GT(held, before + (64 << 20)) << "before " << before;

  IdleTrimmer::Hooks hooks;  // the real malloc_trim
  int64_t reported = 0;
  hooks.rss_bytes = [&reported] { return reported; };
  IdleTrimmer trimmer(hooks, /*slack_bytes=*/0);
  reported = 1;
  ASSERT_TRUE(trimmer.Poll(true));
  const int64_t after = ResidentBytes();
  EXPECT_LT(after, held - (64 << 20))
      << "before " << before << " held " << held;
  std::free(pin);
}

}  // namespace
}  // namespace seqboat
