#include "server/snapshot_exchange.h"

#include <algorithm>
#include <chrono>
#include <mutex>
#include <optional>
#include <thread>
#include <utility>

#include "absl/strings/str_cat.h"
#include "clients/common/api_key.h"
#include "engine/state/snapshot_file.h"
#include "server/grpc_status.h"
#include "spdlog/spdlog.h"

namespace seqboat {

SnapshotExchangeService::SnapshotExchangeService(Engine* engine,
                                                 const ApiKeyStore* api_keys,
                                                 std::string peer_tenant,
                                                 absl::Duration engine_wait)
    : engine_(*engine),
      api_keys_(api_keys),
      peer_tenant_(std::move(peer_tenant)),
      engine_wait_(engine_wait) {}

grpc::ServerUnaryReactor* SnapshotExchangeService::ExportSnapshot(
    grpc::CallbackServerContext* context,
    const v1::ExportSnapshotRequest* request,
    v1::ExportSnapshotResponse* response) {
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  if (api_keys_ != nullptr) {
    const auto& metadata = context->client_metadata();
    const auto it = metadata.find("authorization");
    const std::optional<std::string> tenant = api_keys_->Authorize(
        it == metadata.end()
            ? absl::string_view()
            : absl::string_view(it->second.data(), it->second.size()));
    if (!tenant.has_value()) {
      reactor->Finish(grpc::Status(
          grpc::StatusCode::UNAUTHENTICATED,
          "missing or unknown API key: send `authorization: Bearer KEY`"));
      return reactor;
    }
    if (*tenant != peer_tenant_) {
      reactor->Finish(grpc::Status(
          grpc::StatusCode::PERMISSION_DENIED,
          absl::StrCat("only the peers' tenant (--prefix_cache_peer_tenant) "
                       "may export snapshots")));
      return reactor;
    }
  }
  const std::vector<int32_t> tokens(request->token_ids().begin(),
                                    request->token_ids().end());
  absl::StatusOr<std::string> bytes = engine_.ExportSnapshot(
      request->cache_scope(), tokens, request->min_tokens(), engine_wait_);
  if (!bytes.ok()) {
    reactor->Finish(ToGrpcStatus(bytes.status()));
    return reactor;
  }
  // The tokens it holds: what is left of the file but its fixed parts.
  const int64_t fixed = SnapshotFileBytes(
      request->cache_scope().size(), 0, engine_.summary().state_bytes_per_slot);
  response->set_tokens(static_cast<uint32_t>(
      (static_cast<int64_t>(bytes->size()) - fixed) / sizeof(int32_t)));
  *response->mutable_snapshot() = *std::move(bytes);
  reactor->Finish(grpc::Status::OK);
  return reactor;
}

// One FetchAsync: every peer's call, and the best answer so far.
struct SnapshotPeerClient::Fetch {
  struct Call {
    grpc::ClientContext context;
    v1::ExportSnapshotResponse response;
  };
  v1::ExportSnapshotRequest request;
  std::vector<std::unique_ptr<Call>> calls;
  std::function<void(absl::StatusOr<std::string>)> done;
  std::mutex mu;
  int pending = 0;            // guarded by mu
  std::string best;           // guarded by mu
  uint32_t best_tokens = 0;   // guarded by mu
  bool any_answered = false;  // guarded by mu: a peer said NOT_FOUND
  grpc::Status last_error;    // guarded by mu
};

SnapshotPeerClient::SnapshotPeerClient(SnapshotPeerOptions options)
    : options_(std::move(options)) {
  grpc::ChannelArguments args;
  args.SetMaxReceiveMessageSize(static_cast<int>(
      std::min<int64_t>(options_.max_message_bytes, INT32_MAX)));
  // A peer that went away is tried again soon after it returns.
  args.SetInt(GRPC_ARG_INITIAL_RECONNECT_BACKOFF_MS, 200);
  args.SetInt(GRPC_ARG_MAX_RECONNECT_BACKOFF_MS, 2000);
  if (!options_.tls_server_name.empty()) {
    args.SetSslTargetNameOverride(options_.tls_server_name);
  }
  auto credentials = options_.credentials != nullptr
                         ? options_.credentials
                         : grpc::InsecureChannelCredentials();
  for (const std::string& peer : options_.peers) {
    stubs_.push_back(v1::SnapshotExchange::NewStub(
        CreateChannelWithApiKey(peer, credentials, args, options_.api_key)));
  }
}

SnapshotPeerClient::~SnapshotPeerClient() {
  while (in_flight_.load() > 0) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
}

void SnapshotPeerClient::FetchAsync(
    PeerFetch fetch, std::function<void(absl::StatusOr<std::string>)> done) {
  if (stubs_.empty()) {
    done(absl::NotFoundError("no peers"));
    return;
  }
  if (in_flight_.fetch_add(1) >= options_.max_in_flight) {
    in_flight_.fetch_sub(1);
    done(absl::ResourceExhaustedError(
        absl::StrCat(options_.max_in_flight, " peer fetches in flight")));
    return;
  }
  auto f = std::make_shared<Fetch>();
  f->request.set_cache_scope(std::move(fetch.scope));
  f->request.mutable_token_ids()->Add(fetch.tokens.begin(), fetch.tokens.end());
  f->request.set_min_tokens(static_cast<uint32_t>(fetch.min_tokens));
  f->done = std::move(done);
  f->pending = static_cast<int>(stubs_.size());
  const auto deadline = std::chrono::system_clock::now() +
                        absl::ToChronoMilliseconds(options_.deadline);
  for (size_t i = 0; i < stubs_.size(); ++i) {
    f->calls.push_back(std::make_unique<Fetch::Call>());
    f->calls.back()->context.set_deadline(deadline);
  }
  for (size_t i = 0; i < stubs_.size(); ++i) {
    Fetch::Call* call = f->calls[i].get();
    stubs_[i]->async()->ExportSnapshot(
        &call->context, &f->request, &call->response,
        [this, f, call](grpc::Status status) {
          std::unique_lock<std::mutex> lock(f->mu);
          // An oversize answer goes on to the engine, which refuses and
          // counts it (the channel's limit bounds what is received).
          if (status.ok() && call->response.tokens() >= f->best_tokens) {
            f->best_tokens = call->response.tokens();
            f->best = std::move(*call->response.mutable_snapshot());
          } else if (status.ok()) {
            f->any_answered = true;  // shorter than another's
          } else if (status.error_code() == grpc::StatusCode::NOT_FOUND) {
            f->any_answered = true;
          } else {
            f->last_error = status;
          }
          if (--f->pending > 0) return;
          absl::StatusOr<std::string> answer;
          if (!f->best.empty()) {
            answer = std::move(f->best);
          } else if (f->any_answered) {
            answer = absl::NotFoundError("no peer has a longer snapshot");
          } else {
            answer = absl::UnavailableError(absl::StrCat(
                "no peer answered: ", f->last_error.error_message()));
          }
          lock.unlock();
          f->done(std::move(answer));
          in_flight_.fetch_sub(1);
        });
  }
}

}  // namespace seqboat
