// Runs seqboat_server as a child process for end-to-end tests: starts it on
// a free port, reads the "listening on HOST:PORT" line, signals it and
// collects its exit status. The child dies with the test process.
#ifndef SEQBOAT_TESTS_E2E_SERVER_PROCESS_H_
#define SEQBOAT_TESTS_E2E_SERVER_PROCESS_H_

#include <sys/types.h>

#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"

namespace seqboat {

class ServerProcess {
 public:
  // Starts `binary` with `args` and waits up to `timeout` for it to listen.
  static absl::StatusOr<std::unique_ptr<ServerProcess>> Start(
      const std::string& binary, const std::vector<std::string>& args,
      absl::Duration timeout);
  // Kills the child if it is still running.
  ~ServerProcess();

  const std::string& address() const { return address_; }
  void Signal(int sig);
  // The exit code, or nullopt if the child did not exit normally in time.
  std::optional<int> WaitForExit(absl::Duration timeout);

 private:
  ServerProcess(pid_t pid, int stdout_fd) : pid_(pid), stdout_fd_(stdout_fd) {}

  pid_t pid_;
  int stdout_fd_;
  bool reaped_ = false;
  std::optional<int> exit_code_;  // set when reaped after a normal exit
  std::string address_;
};

}  // namespace seqboat

#endif  // SEQBOAT_TESTS_E2E_SERVER_PROCESS_H_
