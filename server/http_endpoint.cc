#include "server/http_endpoint.h"

#include <microhttpd.h>
#include <netdb.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstring>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"

namespace seqboat {
namespace {

// Probes and scrapes are small: a request's line and headers must fit in
// this (MHD answers 431 beyond it), and a connection silent for this long is
// closed.
constexpr size_t kConnectionMemoryBytes = 16 * 1024;
constexpr unsigned kIdleTimeoutSeconds = 10;
// Far beyond any scraper and probe set; each held connection is one socket.
constexpr unsigned kMaxConnections = 4096;

MHD_Result Respond(MHD_Connection* connection, unsigned status,
                   const std::string& body, const char* content_type) {
  MHD_Response* response = MHD_create_response_from_buffer(
      body.size(), const_cast<char*>(body.data()), MHD_RESPMEM_MUST_COPY);
  if (response == nullptr) return MHD_NO;
  MHD_add_response_header(response, MHD_HTTP_HEADER_CONTENT_TYPE, content_type);
  const MHD_Result queued = MHD_queue_response(connection, status, response);
  MHD_destroy_response(response);
  return queued;
}

MHD_Result Handle(void* cls, MHD_Connection* connection, const char* url,
                  const char* method, const char* /*version*/,
                  const char* /*upload_data*/, size_t* /*upload_data_size*/,
                  void** /*request_state*/) {
  const auto& handlers = *static_cast<const HttpEndpoint::Handlers*>(cls);
  constexpr char kText[] = "text/plain; charset=utf-8";
  // Only GET (and HEAD) exist here. Answering on the first call, before any
  // body is read, means a large upload is refused unread: MHD closes the
  // connection instead of consuming it.
  if (std::strcmp(method, MHD_HTTP_METHOD_GET) != 0 &&
      std::strcmp(method, MHD_HTTP_METHOD_HEAD) != 0) {
    return Respond(connection, MHD_HTTP_METHOD_NOT_ALLOWED,
                   "only GET is served here\n", kText);
  }
  const std::string path(url);
  if (path == "/metrics") {
    if (handlers.authorize_metrics) {
      const char* authorization = MHD_lookup_connection_value(
          connection, MHD_HEADER_KIND, MHD_HTTP_HEADER_AUTHORIZATION);
      if (!handlers.authorize_metrics(authorization != nullptr ? authorization
                                                               : "")) {
        return Respond(connection, MHD_HTTP_UNAUTHORIZED,
                       "missing or incorrect key for /metrics\n", kText);
      }
    }
    return Respond(connection, MHD_HTTP_OK, handlers.metrics(),
                   "text/plain; version=0.0.4; charset=utf-8");
  }
  if (path == "/healthz")
    return Respond(connection, MHD_HTTP_OK, "ok\n", kText);
  if (path == "/readyz") {
    const bool ok = handlers.ready();
    return Respond(connection, ok ? MHD_HTTP_OK : MHD_HTTP_SERVICE_UNAVAILABLE,
                   ok ? "ready\n" : "not ready\n", kText);
  }
  return Respond(connection, MHD_HTTP_NOT_FOUND, "not found\n", kText);
}

}  // namespace

absl::StatusOr<int> ListenTcp(const std::string& host, int port) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_PASSIVE | AI_NUMERICSERV;
  addrinfo* found = nullptr;
  const std::string service = std::to_string(port);
  if (int rc = getaddrinfo(host.empty() ? nullptr : host.c_str(),
                           service.c_str(), &hints, &found);
      rc != 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "cannot resolve HTTP host ", host, ": ", gai_strerror(rc)));
  }
  int fd = -1;
  std::string error = "no address";
  for (addrinfo* a = found; a != nullptr && fd < 0; a = a->ai_next) {
    fd = socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC, a->ai_protocol);
    if (fd < 0) continue;
    int yes = 1;
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof(yes));
    if (bind(fd, a->ai_addr, a->ai_addrlen) != 0 || listen(fd, 128) != 0) {
      error = std::strerror(errno);
      close(fd);
      fd = -1;
    }
  }
  freeaddrinfo(found);
  if (fd < 0) {
    return absl::UnavailableError(absl::StrCat("cannot listen for HTTP on ",
                                               host, ":", port, ": ", error));
  }
  return fd;
}

int BoundPort(int fd) {
  sockaddr_storage addr{};
  socklen_t len = sizeof(addr);
  if (getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) != 0) return 0;
  if (addr.ss_family == AF_INET) {
    return ntohs(reinterpret_cast<sockaddr_in*>(&addr)->sin_port);
  }
  if (addr.ss_family == AF_INET6) {
    return ntohs(reinterpret_cast<sockaddr_in6*>(&addr)->sin6_port);
  }
  return 0;
}

absl::StatusOr<std::unique_ptr<HttpEndpoint>> HttpEndpoint::Start(
    const std::string& host, int port, Handlers handlers,
    HttpsCredentials* tls) {
  if (!handlers.metrics || !handlers.ready) {
    return absl::InvalidArgumentError("HTTP endpoint needs both handlers");
  }
  absl::StatusOr<int> fd = ListenTcp(host, port);
  if (!fd.ok()) return fd.status();
  std::unique_ptr<HttpEndpoint> endpoint(new HttpEndpoint());
  endpoint->handlers_ = std::move(handlers);
  endpoint->port_ = BoundPort(*fd);
  std::vector<MHD_OptionItem> tls_options =
      HttpsCredentials::DaemonOptions(tls);
  endpoint->daemon_ = MHD_start_daemon(
      MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_EPOLL |
          HttpsCredentials::DaemonFlags(tls),
      0, nullptr, nullptr, &Handle, &endpoint->handlers_,
      MHD_OPTION_LISTEN_SOCKET, *fd, MHD_OPTION_CONNECTION_MEMORY_LIMIT,
      kConnectionMemoryBytes, MHD_OPTION_CONNECTION_TIMEOUT,
      kIdleTimeoutSeconds, MHD_OPTION_CONNECTION_LIMIT, kMaxConnections,
      MHD_OPTION_ARRAY, tls_options.data(), MHD_OPTION_END);
  if (endpoint->daemon_ == nullptr) {
    close(*fd);
    return absl::InternalError(
        absl::StrCat("cannot start the HTTP server on ", host, ":", port));
  }
  return endpoint;
}

HttpEndpoint::~HttpEndpoint() {
  if (daemon_ == nullptr) return;
  // MHD_stop_daemon does not close a socket it was given.
  const MHD_DaemonInfo* info =
      MHD_get_daemon_info(daemon_, MHD_DAEMON_INFO_LISTEN_FD);
  const int fd = info != nullptr ? info->listen_fd : -1;
  MHD_stop_daemon(daemon_);
  if (fd >= 0) close(fd);
}

}  // namespace seqboat
