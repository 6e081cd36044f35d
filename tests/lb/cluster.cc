#include "tests/lb/cluster.h"

#include <arpa/inet.h>
#include <httplib.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <fstream>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "absl/time/clock.h"

namespace seqboat {
namespace {

constexpr char kNginx[] = "/usr/sbin/nginx";

bool CanConnect(int port) {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) return false;
  sockaddr_in addr = {};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = htons(static_cast<uint16_t>(port));
  const bool ok =
      connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0;
  close(fd);
  return ok;
}

}  // namespace

absl::StatusOr<Replica> StartReplica(const std::string& dir, int index,
                                     const std::vector<std::string>& extra) {
  std::vector<std::string> argv = {
      "server/seqboat_server", "--model_dir=tests/data/tiny_mamba",
      "--host=127.0.0.1",      "--port=0",
      "--http_port=0",         "--log_level=debug"};
  argv.insert(argv.end(), extra.begin(), extra.end());
  const std::string base = absl::StrCat(dir, "/replica", index);
  auto process = ChildProcess::Start(argv, base + ".stdout", base + ".stderr");
  if (!process.ok()) return process.status();
  Replica r;
  r.process = *std::move(process);
  // The HTTP line comes first; the gRPC line means startup is complete.
  auto http = r.process->WaitForLine("http listening on ", absl::Seconds(60));
  if (!http.ok()) return http.status();
  auto grpc = r.process->WaitForLine("listening on ", absl::Seconds(60));
  if (!grpc.ok()) return grpc.status();
  r.grpc_address = *grpc;
  const size_t colon = http->rfind(':');
  r.http_host = http->substr(0, colon);
  if (!absl::SimpleAtoi(http->substr(colon + 1), &r.http_port)) {
    return absl::InternalError(absl::StrCat("bad HTTP address ", *http));
  }
  return r;
}

absl::StatusOr<std::pair<int, std::string>> HttpGet(const Replica& replica,
                                                    const std::string& path) {
  httplib::Client client(replica.http_host, replica.http_port);
  client.set_connection_timeout(5);
  client.set_read_timeout(5);
  auto res = client.Get(path.c_str());
  if (!res) {
    return absl::UnavailableError(
        absl::StrCat("GET ", path, ": ", httplib::to_string(res.error())));
  }
  return std::make_pair(res->status, res->body);
}

std::optional<double> SampleValue(const std::string& text,
                                  const std::string& series) {
  for (absl::string_view line : absl::StrSplit(text, '\n')) {
    if (!absl::ConsumePrefix(&line, series) || !absl::ConsumePrefix(&line, " "))
      continue;
    double value;
    if (absl::SimpleAtod(line, &value)) return value;
  }
  return std::nullopt;
}

namespace {

// The server block's TLS lines: the listener's certificate, and the
// replicas' CA and name and nginx's client certificate for them.
std::string NginxTlsLines(const NginxTls& tls) {
  return absl::StrCat(
      "    ssl_certificate ", tls.listen_cert, ";\n",
      "    ssl_certificate_key ", tls.listen_key, ";\n",
      "    grpc_ssl_verify on;\n", "    grpc_ssl_trusted_certificate ",
      tls.upstream_ca, ";\n", "    grpc_ssl_name localhost;\n",
      "    grpc_ssl_certificate ", tls.client_cert, ";\n",
      "    grpc_ssl_certificate_key ", tls.client_key, ";\n",
      // One TLS session per replica, not a handshake per connection.
      "    grpc_ssl_session_reuse on;\n");
}

}  // namespace

std::string NginxGrpcConfig(const std::string& prefix, int port,
                            const std::vector<std::string>& upstreams,
                            const std::string& balance, const NginxTls* tls) {
  std::string servers =
      balance.empty() ? "" : absl::StrCat("    ", balance, "\n");
  for (const std::string& u : upstreams) {
    // One failure takes a replica out for 30 s, so new streams go to the
    // live ones after a crash instead of probing the dead one again.
    absl::StrAppend(&servers, "    server ", u,
                    " max_fails=1 fail_timeout=30s;\n");
  }
  return absl::StrCat(
      "daemon off;\n"
      "worker_processes 1;\n"
      "pid ",
      prefix,
      "/nginx.pid;\n"
      "error_log ",
      prefix,
      "/error.log info;\n"
      "events { worker_connections 512; }\n"
      "http {\n"
      "  access_log ",
      prefix,
      "/access.log;\n"
      "  client_body_temp_path ",
      prefix,
      "/client_body;\n"
      "  proxy_temp_path ",
      prefix,
      "/proxy;\n"
      "  fastcgi_temp_path ",
      prefix,
      "/fastcgi;\n"
      "  uwsgi_temp_path ",
      prefix,
      "/uwsgi;\n"
      "  scgi_temp_path ",
      prefix,
      "/scgi;\n"
      "  upstream seqboat {\n",
      servers,
      "    keepalive 32;\n"
      "  }\n"
      "  server {\n"
      "    listen 127.0.0.1:",
      port, tls != nullptr ? " ssl" : "", " http2;\n",
      tls != nullptr ? NginxTlsLines(*tls) : "",
      "    location / {\n"
      "      grpc_pass ",
      tls != nullptr ? "grpcs" : "grpc",
      "://seqboat;\n"
      "      grpc_read_timeout 300s;\n"
      "      grpc_send_timeout 300s;\n"
      "      grpc_next_upstream error timeout;\n"
      "    }\n"
      "  }\n"
      "}\n");
}

absl::StatusOr<std::unique_ptr<ChildProcess>> StartNginx(
    const std::string& prefix, const std::vector<std::string>& upstreams,
    int* port, const std::string& balance, const NginxTls* tls) {
  if (access(kNginx, X_OK) != 0) {
    return absl::FailedPreconditionError(
        "no /usr/sbin/nginx: run deploy/setup.sh (nginx-light)");
  }
  absl::Status last = absl::UnknownError("nginx did not start");
  for (int attempt = 0; attempt < 3; ++attempt) {
    auto free_port = PickFreePort();
    if (!free_port.ok()) return free_port.status();
    const std::string conf = prefix + "/nginx.conf";
    std::ofstream(conf) << NginxGrpcConfig(prefix, *free_port, upstreams,
                                           balance, tls);
    auto nginx =
        ChildProcess::Start({kNginx, "-p", prefix, "-c", conf},
                            prefix + "/nginx.stdout", prefix + "/nginx.stderr");
    if (!nginx.ok()) return nginx.status();
    const absl::Time end = absl::Now() + absl::Seconds(10);
    while (absl::Now() < end && (*nginx)->Running() &&
           !CanConnect(*free_port)) {
      absl::SleepFor(absl::Milliseconds(20));
    }
    if ((*nginx)->Running() && CanConnect(*free_port)) {
      *port = *free_port;
      return nginx;
    }
    last = absl::InternalError(absl::StrCat(
        "nginx failed: ", ReadFileOrEmpty(prefix + "/nginx.stderr"),
        ReadFileOrEmpty(prefix + "/error.log")));
  }
  return last;
}

std::vector<std::string> AcceptedRequestIds(const std::string& log) {
  std::vector<std::string> ids;
  for (absl::string_view line : absl::StrSplit(log, '\n')) {
    const size_t at = line.find("request ");
    const size_t accepted = line.find(" accepted:");
    if (at == absl::string_view::npos || accepted == absl::string_view::npos ||
        accepted < at)
      continue;
    ids.emplace_back(line.substr(at + 8, accepted - at - 8));
  }
  return ids;
}

void StopCluster(ChildProcess* nginx, std::vector<Replica>& replicas) {
  if (nginx != nullptr) {
    nginx->Signal(SIGQUIT);
    nginx->WaitForExit(absl::Seconds(10));
  }
  for (Replica& r : replicas) {
    r.process->Signal(SIGTERM);
    r.process->WaitForExit(absl::Seconds(30));
  }
}

}  // namespace seqboat
