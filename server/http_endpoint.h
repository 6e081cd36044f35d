// The HTTP side port: /metrics (Prometheus text format), /healthz (the
// process is up) and /readyz (it should get traffic). Served by libmicrohttpd
// from one event-driven thread of its own, so idle, half-sent or slow
// connections cost a socket each, never a worker: probes are answered at
// once however many of them are held open. Requests are bounded (headers by
// a per-connection memory limit, bodies refused unread, idle connections
// closed), and nothing here touches gRPC or the engine. /metrics may ask for
// a key of its own (401 without it); the probes never do. Over TLS when
// given HttpsCredentials (then plain HTTP to the port fails its handshake).
#ifndef SEQBOAT_SERVER_HTTP_ENDPOINT_H_
#define SEQBOAT_SERVER_HTTP_ENDPOINT_H_

#include <functional>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "server/https_credentials.h"

namespace seqboat {

// A listening TCP socket on `host`:`port` (0 picks a free port), with
// SO_REUSEADDR only: the default SO_REUSEPORT of some servers would let a
// second process bind the same port and silently take half of the traffic.
// For libmicrohttpd daemons, which are given the socket.
absl::StatusOr<int> ListenTcp(const std::string& host, int port);
// The port a socket is bound to; 0 if it cannot be read.
int BoundPort(int fd);

class HttpEndpoint {
 public:
  struct Handlers {
    std::function<std::string()> metrics;  // the /metrics body
    std::function<bool()> ready;           // /readyz: 200 if true, else 503
    // /metrics' check of the Authorization header's value ("" if none);
    // unset: /metrics is open.
    std::function<bool(const char*)> authorize_metrics;
  };

  // Binds `host`:`port` (0 picks a free port) and starts serving, over TLS
  // when `tls` is not null (it must outlive the endpoint).
  static absl::StatusOr<std::unique_ptr<HttpEndpoint>> Start(
      const std::string& host, int port, Handlers handlers,
      HttpsCredentials* tls = nullptr);
  // Stops serving and joins the thread.
  ~HttpEndpoint();

  int port() const { return port_; }

 private:
  HttpEndpoint() = default;

  Handlers handlers_;
  MHD_Daemon* daemon_ = nullptr;
  int port_ = 0;
};

}  // namespace seqboat

#endif  // SEQBOAT_SERVER_HTTP_ENDPOINT_H_
