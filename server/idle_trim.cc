#include "server/idle_trim.h"

#include <malloc.h>
#include <unistd.h>

#include <cstdio>
#include <utility>

namespace seqboat {

int64_t ResidentBytes() {
  FILE* f = std::fopen("/proc/self/statm", "r");
  if (f == nullptr) return -1;
  long size = 0, resident = 0;
  const int read = std::fscanf(f, "%ld %ld", &size, &resident);
  std::fclose(f);
  if (read != 2) return -1;
  return static_cast<int64_t>(resident) * sysconf(_SC_PAGESIZE);
}

IdleTrimmer::IdleTrimmer(Hooks hooks, int64_t slack_bytes)
    : hooks_(std::move(hooks)), slack_bytes_(slack_bytes) {
  if (!hooks_.rss_bytes) hooks_.rss_bytes = ResidentBytes;
  if (!hooks_.trim) hooks_.trim = [] { malloc_trim(0); };
  floor_ = hooks_.rss_bytes();
}

bool IdleTrimmer::Poll(bool idle) {
  if (!idle) return false;
  const int64_t rss = hooks_.rss_bytes();
  if (rss < 0 || rss <= floor_ + slack_bytes_) return false;
  hooks_.trim();
  floor_ = hooks_.rss_bytes();
  return true;
}

}  // namespace seqboat
