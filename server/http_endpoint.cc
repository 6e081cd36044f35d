#include "server/http_endpoint.h"

#include <httplib.h>

#include <chrono>
#include <utility>

#include "absl/strings/str_cat.h"

namespace seqboat {

absl::StatusOr<std::unique_ptr<HttpEndpoint>> HttpEndpoint::Start(
    const std::string& host, int port, Handlers handlers) {
  if (!handlers.metrics || !handlers.ready) {
    return absl::InvalidArgumentError("HTTP endpoint needs both handlers");
  }
  std::unique_ptr<HttpEndpoint> endpoint(new HttpEndpoint());
  endpoint->server_ = std::make_unique<httplib::Server>();
  httplib::Server& server = *endpoint->server_;
  // Scrapes and probes are rare and cheap: two threads are plenty, and the
  // library's default (one per core, at least eight) would only idle.
  server.new_task_queue = [] { return new httplib::ThreadPool(2); };
  // The library's default SO_REUSEPORT would let a second server bind the
  // same port and silently take half of the scrapes; plain SO_REUSEADDR
  // (fast restarts) makes a busy port an error instead.
  server.set_socket_options([](socket_t sock) {
    int yes = 1;
    setsockopt(sock, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof(yes));
  });
  server.Get("/metrics", [metrics = handlers.metrics](const httplib::Request&,
                                                      httplib::Response& res) {
    res.set_content(metrics(), "text/plain; version=0.0.4; charset=utf-8");
  });
  server.Get("/healthz", [](const httplib::Request&, httplib::Response& res) {
    res.set_content("ok\n", "text/plain");
  });
  server.Get("/readyz", [ready = handlers.ready](const httplib::Request&,
                                                 httplib::Response& res) {
    const bool ok = ready();
    res.status = ok ? 200 : 503;
    res.set_content(ok ? "ready\n" : "not ready\n", "text/plain");
  });

  if (port == 0) {
    endpoint->port_ = server.bind_to_any_port(host);
  } else if (server.bind_to_port(host, port)) {
    endpoint->port_ = port;
  }
  if (endpoint->port_ <= 0) {
    return absl::UnavailableError(
        absl::StrCat("cannot listen for HTTP on ", host, ":", port));
  }
  endpoint->thread_ = std::thread([&server] { server.listen_after_bind(); });
  // stop() is a no-op until the accept loop runs, so the destructor could
  // otherwise wait on a loop that nothing will end. Bounded wait.
  for (int i = 0; i < 500 && !server.is_running(); ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  if (!server.is_running()) {
    return absl::InternalError("HTTP accept loop did not start");
  }
  return endpoint;
}

HttpEndpoint::~HttpEndpoint() {
  if (server_ != nullptr) server_->stop();
  if (thread_.joinable()) thread_.join();
}

}  // namespace seqboat
