// Gives freed heap memory back to the system once the server is idle. A
// burst of requests (tokenizing long texts, many gRPC threads' buffers)
// leaves glibc holding freed pages in its arenas; without a trim the process
// keeps its peak RSS for good. Trimming only when idle keeps the cost (a walk
// over the arenas) away from requests.
#ifndef SEQBOAT_SERVER_IDLE_TRIM_H_
#define SEQBOAT_SERVER_IDLE_TRIM_H_

#include <cstdint>
#include <functional>

namespace seqboat {

// Resident bytes of this process (/proc/self/statm), or -1.
int64_t ResidentBytes();

class IdleTrimmer {
 public:
  struct Hooks {
    std::function<int64_t()> rss_bytes;  // default: ResidentBytes
    std::function<void()> trim;          // default: malloc_trim(0)
  };
  // Trims when RSS has grown by more than `slack_bytes` since the last trim
  // (or since start-up).
  explicit IdleTrimmer(Hooks hooks = {}, int64_t slack_bytes = 32 << 20);

  // Called periodically; trims if `idle` and RSS grew past the slack.
  // Returns whether it trimmed.
  bool Poll(bool idle);

 private:
  Hooks hooks_;
  const int64_t slack_bytes_;
  int64_t floor_ = -1;  // RSS after the last trim
};

}  // namespace seqboat

#endif  // SEQBOAT_SERVER_IDLE_TRIM_H_
