// A child process for tests: started with its stdout and stderr in files,
// killed with the test (PR_SET_PDEATHSIG) and by the destructor, reaped with
// a bounded wait.
#ifndef SEQBOAT_TESTS_LB_CHILD_PROCESS_H_
#define SEQBOAT_TESTS_LB_CHILD_PROCESS_H_

#include <sys/types.h>

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"

namespace seqboat {

class ChildProcess {
 public:
  // Runs argv[0] with the arguments; stdout and stderr go to the files.
  static absl::StatusOr<std::unique_ptr<ChildProcess>> Start(
      const std::vector<std::string>& argv, const std::string& stdout_path,
      const std::string& stderr_path);
  ~ChildProcess();  // SIGKILL and reap if still running

  // The rest of the first stdout line starting with `prefix`, waiting up to
  // `timeout`; fails early if the child exits.
  absl::StatusOr<std::string> WaitForLine(const std::string& prefix,
                                          absl::Duration timeout);
  void Signal(int sig);
  // The exit code, or nullopt if it did not exit normally within `timeout`.
  std::optional<int> WaitForExit(absl::Duration timeout);
  bool Running();
  pid_t pid() const { return pid_; }
  const std::string& stdout_path() const { return stdout_path_; }
  const std::string& stderr_path() const { return stderr_path_; }

 private:
  ChildProcess(pid_t pid, std::string out, std::string err)
      : pid_(pid), stdout_path_(std::move(out)), stderr_path_(std::move(err)) {}

  pid_t pid_;
  std::string stdout_path_, stderr_path_;
  bool reaped_ = false;
  std::optional<int> exit_code_;
};

// Reads a whole file ("" if missing).
std::string ReadFileOrEmpty(const std::string& path);

// A TCP port on 127.0.0.1 that was free a moment ago (for programs that
// cannot bind port 0 and report it, like nginx).
absl::StatusOr<int> PickFreePort();

}  // namespace seqboat

#endif  // SEQBOAT_TESTS_LB_CHILD_PROCESS_H_
