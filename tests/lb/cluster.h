// Building blocks of the load-balancer tests: seqboat_server replicas on
// free loopback ports, their /metrics, and Debian's nginx as a gRPC balancer
// in a temporary prefix.
#ifndef SEQBOAT_TESTS_LB_CLUSTER_H_
#define SEQBOAT_TESTS_LB_CLUSTER_H_

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "tests/lb/child_process.h"

namespace seqboat {

struct Replica {
  std::unique_ptr<ChildProcess> process;
  std::string grpc_address;  // host:port
  std::string http_host;
  int http_port = 0;
};

// Starts server/seqboat_server on tests/data/tiny_mamba with --port=0 and
// --http_port=0 and debug request logging; output goes to `dir`/replica<i>.*.
absl::StatusOr<Replica> StartReplica(const std::string& dir, int index,
                                     const std::vector<std::string>& extra);

// GET `path` from the replica's HTTP side port: (status, body).
absl::StatusOr<std::pair<int, std::string>> HttpGet(const Replica& replica,
                                                    const std::string& path);

// The value of the sample named exactly `series` (name plus labels as
// rendered, e.g. seqboat_requests_total{code="OK",frontend="grpc"}); nullopt if
// absent.
std::optional<double> SampleValue(const std::string& metrics_text,
                                  const std::string& series);

// TLS on both of nginx's sides (PEM files): what its listener presents to
// clients, and, towards the replicas, the CA it checks them against (as
// "localhost") and the client certificate it presents (mutual TLS).
struct NginxTls {
  std::string listen_cert, listen_key;
  std::string upstream_ca;
  std::string client_cert, client_key;
};

// An nginx configuration that listens on 127.0.0.1:`port` with HTTP/2 and
// grpc_passes each request (each gRPC stream) round-robin to `upstreams`,
// or as `balance` says (an upstream directive: the deployed config's
// "hash $http_x_session_id consistent;"), over TLS on both sides when `tls`
// is given. All paths (pid, logs, temp dirs) are under `prefix`.
std::string NginxGrpcConfig(const std::string& prefix, int port,
                            const std::vector<std::string>& upstreams,
                            const std::string& balance = "",
                            const NginxTls* tls = nullptr);

// Writes the configuration under `prefix` and starts nginx in the
// foreground on a free port (a few attempts, in case another process takes
// the port first). Sets *port.
absl::StatusOr<std::unique_ptr<ChildProcess>> StartNginx(
    const std::string& prefix, const std::vector<std::string>& upstreams,
    int* port, const std::string& balance = "", const NginxTls* tls = nullptr);

// Stops nginx (null: none) gracefully, then each replica with SIGTERM (a
// drain), waiting for each to exit.
void StopCluster(ChildProcess* nginx, std::vector<Replica>& replicas);

// Request ids of "request X accepted" lines in a replica's debug log.
std::vector<std::string> AcceptedRequestIds(const std::string& log);

}  // namespace seqboat

#endif  // SEQBOAT_TESTS_LB_CLUSTER_H_
