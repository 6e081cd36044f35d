#include "tests/lb/child_process.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <fstream>
#include <sstream>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"

namespace seqboat {

std::string ReadFileOrEmpty(const std::string& path) {
  std::ifstream f(path);
  std::stringstream s;
  s << f.rdbuf();
  return s.str();
}

absl::StatusOr<std::unique_ptr<ChildProcess>> ChildProcess::Start(
    const std::vector<std::string>& args, const std::string& stdout_path,
    const std::string& stderr_path) {
  if (args.empty()) return absl::InvalidArgumentError("no program");
  const int out = open(stdout_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  const int err = open(stderr_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  if (out < 0 || err < 0) {
    if (out >= 0) close(out);
    if (err >= 0) close(err);
    return absl::InternalError("cannot create output files");
  }
  std::vector<std::string> storage = args;
  std::vector<char*> argv;
  for (std::string& a : storage) argv.push_back(a.data());
  argv.push_back(nullptr);
  const pid_t parent = getpid();
  const pid_t pid = fork();
  if (pid < 0) {
    close(out);
    close(err);
    return absl::InternalError("fork failed");
  }
  if (pid == 0) {
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (getppid() != parent) _exit(127);
    dup2(out, STDOUT_FILENO);
    dup2(err, STDERR_FILENO);
    close(out);
    close(err);
    execv(argv[0], argv.data());
    _exit(127);
  }
  close(out);
  close(err);
  return std::unique_ptr<ChildProcess>(
      new ChildProcess(pid, stdout_path, stderr_path));
}

ChildProcess::~ChildProcess() {
  if (!reaped_) {
    kill(pid_, SIGKILL);
    waitpid(pid_, nullptr, 0);
  }
}

absl::StatusOr<std::string> ChildProcess::WaitForLine(const std::string& prefix,
                                                      absl::Duration timeout) {
  const absl::Time end = absl::Now() + timeout;
  while (true) {
    const std::string text = ReadFileOrEmpty(stdout_path_);
    for (absl::string_view line : absl::StrSplit(text, '\n')) {
      // Only complete lines: the last piece may still be being written.
      if (absl::StartsWith(line, prefix) &&
          text.find(std::string(line) + "\n") != std::string::npos) {
        return std::string(line.substr(prefix.size()));
      }
    }
    if (!Running()) {
      return absl::InternalError(
          absl::StrCat("child exited before printing '", prefix,
                       "'; stderr: ", ReadFileOrEmpty(stderr_path_)));
    }
    if (absl::Now() >= end) {
      return absl::DeadlineExceededError(
          absl::StrCat("no '", prefix, "' line in time"));
    }
    absl::SleepFor(absl::Milliseconds(20));
  }
}

void ChildProcess::Signal(int sig) {
  if (!reaped_) kill(pid_, sig);
}

bool ChildProcess::Running() {
  if (reaped_) return false;
  int status = 0;
  if (waitpid(pid_, &status, WNOHANG) == pid_) {
    reaped_ = true;
    if (WIFEXITED(status)) exit_code_ = WEXITSTATUS(status);
    return false;
  }
  return true;
}

std::optional<int> ChildProcess::WaitForExit(absl::Duration timeout) {
  const absl::Time end = absl::Now() + timeout;
  while (Running()) {
    if (absl::Now() >= end) return std::nullopt;
    absl::SleepFor(absl::Milliseconds(20));
  }
  return exit_code_;
}

absl::StatusOr<int> PickFreePort() {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) return absl::InternalError("socket failed");
  sockaddr_in addr = {};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = 0;
  socklen_t len = sizeof(addr);
  if (bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0 ||
      getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) != 0) {
    close(fd);
    return absl::InternalError("bind failed");
  }
  const int port = ntohs(addr.sin_port);
  close(fd);
  return port;
}

}  // namespace seqboat
