// The flags of snapshot exchange between replicas (--prefix_cache_peers and
// the ones beside it), their checks, and what the server builds of them:
// the export service every replica serves and the client of its peers.
#ifndef SEQBOAT_SERVER_PEER_FLAGS_H_
#define SEQBOAT_SERVER_PEER_FLAGS_H_

#include <memory>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "engine/engine.h"
#include "server/api_keys.h"
#include "server/snapshot_exchange.h"

namespace seqboat {

// INVALID_ARGUMENT naming the first of these flags out of its range.
absl::Status CheckPeerFlags();

// The export service, with the keys of the other RPCs; with
// --prefix_cache_peers, the engine asks those peers for a snapshot a
// request's prompt extends before prefilling it. A file that cannot be read
// is an error naming it.
absl::StatusOr<std::unique_ptr<SnapshotExchangeService>>
SnapshotExchangeFromFlags(Engine* engine, const ApiKeyStore* api_keys,
                          int32_t max_prompt_tokens);

}  // namespace seqboat

#endif  // SEQBOAT_SERVER_PEER_FLAGS_H_
