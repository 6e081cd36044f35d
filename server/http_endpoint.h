// The HTTP side port: /metrics (Prometheus text format), /healthz (the
// process is up) and /readyz (it should get traffic), served by cpp-httplib
// on its own threads so a slow scrape never touches gRPC or the engine.
#ifndef SEQBOAT_SERVER_HTTP_ENDPOINT_H_
#define SEQBOAT_SERVER_HTTP_ENDPOINT_H_

#include <functional>
#include <memory>
#include <string>
#include <thread>

#include "absl/status/statusor.h"

namespace httplib {
class Server;
}

namespace seqboat {

class HttpEndpoint {
 public:
  struct Handlers {
    std::function<std::string()> metrics;  // the /metrics body
    std::function<bool()> ready;           // /readyz: 200 if true, else 503
  };

  // Binds `host`:`port` (0 picks a free port) and starts serving.
  static absl::StatusOr<std::unique_ptr<HttpEndpoint>> Start(
      const std::string& host, int port, Handlers handlers);
  // Stops serving and joins the thread.
  ~HttpEndpoint();

  int port() const { return port_; }

 private:
  HttpEndpoint() = default;

  std::unique_ptr<httplib::Server> server_;
  std::thread thread_;
  int port_ = 0;
};

}  // namespace seqboat

#endif  // SEQBOAT_SERVER_HTTP_ENDPOINT_H_
