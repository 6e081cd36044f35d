// Prefix snapshots between replicas (proto/seqboat/v1/snapshots.proto): the
// service that exports this replica's snapshots, and the client that asks
// the peers for one at admission (the engine's SnapshotPeers).
//
// The service answers from Engine::ExportSnapshot: a gRPC thread waits for
// the engine thread's next turn (the cache is its) and reads a file of the
// disk tier itself, never the step path. With API keys, only keys of the
// peers' tenant may ask: a scope is any tenant's, and a tenant must not
// learn what another's cache holds.
//
// The client asks every peer at once, each call bounded by the deadline and
// its answer by the size of a snapshot of the whole prompt; the longest
// answer wins. A peer down or slow costs at most the deadline; past
// `max_in_flight` fetches a request asks nobody (counted as failed) and
// prefills as it would have.
#ifndef SEQBOAT_SERVER_SNAPSHOT_EXCHANGE_H_
#define SEQBOAT_SERVER_SNAPSHOT_EXCHANGE_H_

#include <grpcpp/grpcpp.h>

#include <atomic>
#include <memory>
#include <string>
#include <vector>

#include "absl/time/time.h"
#include "engine/engine.h"
#include "engine/state/snapshot_peers.h"
#include "seqboat/v1/snapshots.grpc.pb.h"
#include "server/api_keys.h"

namespace seqboat {

class SnapshotExchangeService final
    : public v1::SnapshotExchange::CallbackService {
 public:
  // `engine` and `api_keys` (null: no keys asked for) must outlive the
  // service; with keys, only `peer_tenant`'s may call.
  SnapshotExchangeService(Engine* engine, const ApiKeyStore* api_keys,
                          std::string peer_tenant,
                          absl::Duration engine_wait = absl::Seconds(2));

  grpc::ServerUnaryReactor* ExportSnapshot(
      grpc::CallbackServerContext* context,
      const v1::ExportSnapshotRequest* request,
      v1::ExportSnapshotResponse* response) override;

 private:
  Engine& engine_;
  const ApiKeyStore* const api_keys_;
  const std::string peer_tenant_;
  const absl::Duration engine_wait_;
};

struct SnapshotPeerOptions {
  std::vector<std::string> peers;  // host:port of each
  absl::Duration deadline = absl::Milliseconds(500);
  int max_in_flight = 4;
  // The largest message a peer may send (one slot's state and the longest
  // prompt's tokens).
  int64_t max_message_bytes = int64_t{64} << 20;
  std::shared_ptr<grpc::ChannelCredentials> credentials;  // null: plaintext
  // The name each peer's certificate must carry, where replicas share one
  // certificate for a service name rather than each its own ("": the
  // host of the peer's address).
  std::string tls_server_name;
  std::string api_key;  // "" : none sent
};

class SnapshotPeerClient final : public SnapshotPeers {
 public:
  explicit SnapshotPeerClient(SnapshotPeerOptions options);
  // Waits for the calls in flight (each ends by its deadline).
  ~SnapshotPeerClient() override;

  void FetchAsync(
      PeerFetch fetch,
      std::function<void(absl::StatusOr<std::string>)> done) override;

 private:
  struct Fetch;
  const SnapshotPeerOptions options_;
  std::vector<std::unique_ptr<v1::SnapshotExchange::Stub>> stubs_;
  std::atomic<int> in_flight_{0};
};

}  // namespace seqboat

#endif  // SEQBOAT_SERVER_SNAPSHOT_EXCHANGE_H_
