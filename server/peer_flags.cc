#include "server/peer_flags.h"

#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "base/file_text.h"
#include "engine/state/snapshot_file.h"
#include "spdlog/spdlog.h"

ABSL_FLAG(std::string, prefix_cache_peers, "",
          "Comma-separated host:port of the other replicas' gRPC ports: a "
          "request whose prompt extends no snapshot here (within "
          "--prefix_cache_peer_min_tokens of its length) asks them for one "
          "before prefilling. Empty: ask nobody.");
ABSL_FLAG(int32_t, prefix_cache_peer_min_tokens, 256,
          "Ask the peers only when at least this many prompt tokens would be "
          "prefilled otherwise.");
ABSL_FLAG(int32_t, prefix_cache_peer_deadline_ms, 500,
          "How long a request waits for the peers' answers at most.");
ABSL_FLAG(int32_t, prefix_cache_peer_max_fetches, 4,
          "Fetches from peers in flight at once; a request past it prefills.");
ABSL_FLAG(std::string, prefix_cache_peer_tenant, "peers",
          "With --api_keys_file: the tenant whose keys may export snapshots "
          "(the replicas' own key); no other key may.");
ABSL_FLAG(std::string, prefix_cache_peer_api_key_file, "",
          "A file holding the key this replica sends to its peers.");
ABSL_FLAG(std::string, prefix_cache_peer_tls_ca_file, "",
          "Speak TLS to the peers, trusting this PEM CA bundle.");
ABSL_FLAG(std::string, prefix_cache_peer_tls_cert_file, "",
          "The client certificate (PEM) presented to peers that ask for one.");
ABSL_FLAG(std::string, prefix_cache_peer_tls_key_file, "",
          "The PEM key of --prefix_cache_peer_tls_cert_file.");
ABSL_FLAG(std::string, prefix_cache_peer_tls_server_name, "",
          "The name every peer's certificate must carry, where the replicas "
          "share one certificate (e.g. for their headless Service's name); "
          "empty: the host of each peer's address.");

namespace seqboat {
namespace {

std::vector<std::string> Peers() {
  std::vector<std::string> peers;
  for (absl::string_view p :
       absl::StrSplit(absl::GetFlag(FLAGS_prefix_cache_peers), ',',
                      absl::SkipWhitespace())) {
    peers.emplace_back(absl::StripAsciiWhitespace(p));
  }
  return peers;
}

absl::StatusOr<std::string> ReadFlagFile(const std::string& flag,
                                         const std::string& path) {
  absl::StatusOr<std::string> text = ReadFileText(path, int64_t{1} << 20);
  if (!text.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("--", flag, ": ", text.status().message()));
  }
  return text;
}

absl::StatusOr<std::shared_ptr<grpc::ChannelCredentials>> PeerCredentials() {
  const std::string ca = absl::GetFlag(FLAGS_prefix_cache_peer_tls_ca_file);
  const std::string cert = absl::GetFlag(FLAGS_prefix_cache_peer_tls_cert_file);
  const std::string key = absl::GetFlag(FLAGS_prefix_cache_peer_tls_key_file);
  if (ca.empty() && cert.empty() && key.empty()) return nullptr;
  grpc::SslCredentialsOptions ssl;
  for (const auto& [flag, path, field] :
       {std::tuple{"prefix_cache_peer_tls_ca_file", &ca, &ssl.pem_root_certs},
        std::tuple{"prefix_cache_peer_tls_cert_file", &cert,
                   &ssl.pem_cert_chain},
        std::tuple{"prefix_cache_peer_tls_key_file", &key,
                   &ssl.pem_private_key}}) {
    if (path->empty()) continue;
    absl::StatusOr<std::string> pem = ReadFlagFile(flag, *path);
    if (!pem.ok()) return pem.status();
    *field = *std::move(pem);
  }
  return grpc::SslCredentials(ssl);
}

}  // namespace

absl::Status CheckPeerFlags() {
  for (const auto& [name, value] :
       {std::pair<absl::string_view, int32_t>{
            "prefix_cache_peer_min_tokens",
            absl::GetFlag(FLAGS_prefix_cache_peer_min_tokens)},
        {"prefix_cache_peer_deadline_ms",
         absl::GetFlag(FLAGS_prefix_cache_peer_deadline_ms)},
        {"prefix_cache_peer_max_fetches",
         absl::GetFlag(FLAGS_prefix_cache_peer_max_fetches)}}) {
    if (value <= 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("--", name, " must be > 0, got ", value));
    }
  }
  if (absl::GetFlag(FLAGS_prefix_cache_peer_tls_cert_file).empty() !=
      absl::GetFlag(FLAGS_prefix_cache_peer_tls_key_file).empty()) {
    return absl::InvalidArgumentError(
        "--prefix_cache_peer_tls_cert_file and "
        "--prefix_cache_peer_tls_key_file go together");
  }
  if (!absl::GetFlag(FLAGS_prefix_cache_peer_tls_server_name).empty() &&
      absl::GetFlag(FLAGS_prefix_cache_peer_tls_ca_file).empty()) {
    return absl::InvalidArgumentError(
        "--prefix_cache_peer_tls_server_name needs "
        "--prefix_cache_peer_tls_ca_file (it names what the peers' "
        "certificates are checked for)");
  }
  return absl::OkStatus();
}

namespace {

absl::Status ConnectPeersFromFlags(Engine& engine, int32_t max_prompt_tokens) {
  SnapshotPeerOptions o;
  o.peers = Peers();
  if (o.peers.empty()) return absl::OkStatus();
  o.deadline =
      absl::Milliseconds(absl::GetFlag(FLAGS_prefix_cache_peer_deadline_ms));
  o.max_in_flight = absl::GetFlag(FLAGS_prefix_cache_peer_max_fetches);
  // One slot's state and the longest prompt's tokens, with room for the
  // scope and the message's own bytes.
  o.max_message_bytes =
      SnapshotFileBytes(4096, static_cast<size_t>(max_prompt_tokens),
                        engine.summary().state_bytes_per_slot) +
      1024;
  absl::StatusOr<std::shared_ptr<grpc::ChannelCredentials>> credentials =
      PeerCredentials();
  if (!credentials.ok()) return credentials.status();
  o.credentials = *std::move(credentials);
  o.tls_server_name = absl::GetFlag(FLAGS_prefix_cache_peer_tls_server_name);
  const std::string key_file =
      absl::GetFlag(FLAGS_prefix_cache_peer_api_key_file);
  if (!key_file.empty()) {
    absl::StatusOr<std::string> key =
        ReadFlagFile("prefix_cache_peer_api_key_file", key_file);
    if (!key.ok()) return key.status();
    o.api_key = std::string(absl::StripAsciiWhitespace(*key));
  }
  const size_t n = o.peers.size();
  absl::Status s = engine.SetSnapshotPeers(
      std::make_shared<SnapshotPeerClient>(std::move(o)),
      absl::GetFlag(FLAGS_prefix_cache_peer_min_tokens));
  if (s.ok()) {
    spdlog::info("asking {} peers for prefix snapshots on a miss", n);
  }
  return s;
}

}  // namespace

absl::StatusOr<std::unique_ptr<SnapshotExchangeService>>
SnapshotExchangeFromFlags(Engine* engine, const ApiKeyStore* api_keys,
                          int32_t max_prompt_tokens) {
  absl::Status peers = ConnectPeersFromFlags(*engine, max_prompt_tokens);
  if (!peers.ok()) return peers;
  return std::make_unique<SnapshotExchangeService>(
      engine, api_keys, absl::GetFlag(FLAGS_prefix_cache_peer_tenant));
}

}  // namespace seqboat
