#include "tests/e2e/server_process.h"

#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <memory>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"

namespace seqboat {

absl::StatusOr<std::unique_ptr<ServerProcess>> ServerProcess::Start(
    const std::string& binary, const std::vector<std::string>& args,
    absl::Duration timeout) {
  int pipe_fds[2];
  if (pipe(pipe_fds) != 0) return absl::InternalError("pipe failed");
  std::vector<std::string> argv_storage = {binary};
  argv_storage.insert(argv_storage.end(), args.begin(), args.end());
  std::vector<char*> argv;
  for (std::string& a : argv_storage) argv.push_back(a.data());
  argv.push_back(nullptr);

  const pid_t parent = getpid();
  pid_t pid = fork();
  if (pid < 0) return absl::InternalError("fork failed");
  if (pid == 0) {
    // A crashed or killed test must not leave a server behind.
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (getppid() != parent) _exit(127);
    dup2(pipe_fds[1], STDOUT_FILENO);
    close(pipe_fds[0]);
    close(pipe_fds[1]);
    execv(binary.c_str(), argv.data());
    _exit(127);
  }
  close(pipe_fds[1]);
  std::unique_ptr<ServerProcess> process(new ServerProcess(pid, pipe_fds[0]));

  // Read stdout until the "listening on" line arrives.
  const absl::Time end = absl::Now() + timeout;
  std::string out;
  while (true) {
    size_t newline;
    while ((newline = out.find('\n')) != std::string::npos) {
      std::string line = out.substr(0, newline);
      out.erase(0, newline + 1);
      constexpr absl::string_view kPrefix = "listening on ";
      if (absl::StartsWith(line, kPrefix)) {
        process->address_ = line.substr(kPrefix.size());
        return process;
      }
    }
    const absl::Duration left = end - absl::Now();
    if (left <= absl::ZeroDuration()) {
      return absl::DeadlineExceededError("server did not start listening");
    }
    pollfd pfd = {process->stdout_fd_, POLLIN, 0};
    if (poll(&pfd, 1, static_cast<int>(absl::ToInt64Milliseconds(left))) <= 0) {
      continue;
    }
    char buf[512];
    ssize_t n = read(process->stdout_fd_, buf, sizeof(buf));
    if (n <= 0) {
      std::optional<int> code = process->WaitForExit(absl::Seconds(5));
      return absl::InternalError(absl::StrCat(
          "server exited before listening, code ", code.value_or(-1)));
    }
    out.append(buf, static_cast<size_t>(n));
  }
}

ServerProcess::~ServerProcess() {
  if (!reaped_) {
    kill(pid_, SIGKILL);
    waitpid(pid_, nullptr, 0);
  }
  close(stdout_fd_);
}

void ServerProcess::Signal(int sig) {
  if (!reaped_) kill(pid_, sig);
}

std::optional<int> ServerProcess::WaitForExit(absl::Duration timeout) {
  const absl::Time end = absl::Now() + timeout;
  while (!reaped_) {
    int status = 0;
    pid_t r = waitpid(pid_, &status, WNOHANG);
    if (r == pid_) {
      reaped_ = true;
      if (WIFEXITED(status)) exit_code_ = WEXITSTATUS(status);
      return exit_code_;
    }
    if (absl::Now() >= end) return std::nullopt;
    absl::SleepFor(absl::Milliseconds(20));
  }
  return exit_code_;
}

}  // namespace seqboat
