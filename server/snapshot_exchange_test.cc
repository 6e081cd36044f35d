// The snapshot exchange over gRPC: a replica that never saw a conversation
// fetches its snapshot from the peer that did and continues it exactly; a
// peer that is down costs a prefill, nothing else; with API keys only the
// peers' tenant may export.
#include "server/snapshot_exchange.h"

#include <grpcpp/grpcpp.h>

#include <cstdio>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "base/file_text.h"
#include "clients/common/api_key.h"
#include "engine/engine.h"
#include "engine/testing/event_collector.h"
#include "engine/testing/greedy_run.h"
#include "gtest/gtest.h"
#include "kernels/cpu/cpu_backend.h"
#include "server/api_keys.h"
#include "server/testing/test_certs.h"

namespace seqboat {
namespace {

constexpr char kModel[] = "tests/data/tiny_hybrid";
constexpr char kPeerKey[] = "peer-key-0123456789abcdef";
constexpr char kTenantKey[] = "alice-key-0123456789abcdef";

std::unique_ptr<Engine> MakeEngine(int64_t cache_bytes) {
  EngineOptions o;
  o.model_dir = kModel;
  o.max_slots = 4;
  o.prefix_cache_bytes = cache_bytes;
  auto e = Engine::Create(o, MakeCpuBackend(1));
  EXPECT_TRUE(e.ok()) << e.status();
  return *std::move(e);
}

std::vector<int32_t> Tokens(int len, int salt) {
  std::vector<int32_t> p(len);
  for (int i = 0; i < len; ++i) p[i] = (i * 37 + salt * 11 + 5) % 251;
  return p;
}

using Result = GreedyResult;

// An engine serving the export on a loopback port.
struct Exporter {
  explicit Exporter(const ApiKeyStore* keys = nullptr,
                    std::shared_ptr<grpc::ServerCredentials> credentials =
                        grpc::InsecureServerCredentials())
      : engine(MakeEngine(64 << 20)), service(engine.get(), keys, "peers") {
    grpc::ServerBuilder builder;
    builder.AddListeningPort("127.0.0.1:0", credentials, &port);
    builder.RegisterService(&service);
    server = builder.BuildAndStart();
    EXPECT_NE(port, 0);
  }
  ~Exporter() {
    server->Shutdown();
    engine->Shutdown();
  }
  std::string address() const { return absl::StrCat("127.0.0.1:", port); }

  std::unique_ptr<Engine> engine;
  SnapshotExchangeService service;
  std::unique_ptr<grpc::Server> server;
  int port = 0;
};

// The first turn on the exporter; the second turn and the answer an engine
// that computes it whole gives.
struct Conversation {
  std::vector<int32_t> p2;
  Result whole;
};

Conversation FirstTurn(Engine& owner) {
  const std::vector<int32_t> p1 = Tokens(40, 3);
  const Result t1 = RunGreedy(owner, p1, 6);
  Conversation c;
  c.p2 = p1;
  c.p2.insert(c.p2.end(), t1.tokens.begin(), t1.tokens.end());
  const std::vector<int32_t> more = Tokens(12, 4);
  c.p2.insert(c.p2.end(), more.begin(), more.end());
  auto whole = MakeEngine(0);
  c.whole = RunGreedy(*whole, c.p2, 8);
  return c;
}

std::shared_ptr<SnapshotPeerClient> Client(std::vector<std::string> peers,
                                           const std::string& key = "") {
  SnapshotPeerOptions o;
  o.peers = std::move(peers);
  o.deadline = absl::Seconds(5);
  o.api_key = key;
  return std::make_shared<SnapshotPeerClient>(std::move(o));
}

TEST(SnapshotExchangeServiceTest, AReplicaResumesFromItsPeersSnapshot) {
  Exporter peer;
  const Conversation c = FirstTurn(*peer.engine);
  auto replica = MakeEngine(64 << 20);
  ASSERT_TRUE(replica->SetSnapshotPeers(Client({peer.address()}), 8).ok());
  const Result r = RunGreedy(*replica, c.p2, 8);
  EXPECT_EQ(r.cached, 40 + 6 - 1);
  EXPECT_EQ(r.tokens, c.whole.tokens);
  const PeerFetchStats st = replica->Stats().peer_fetch;
  EXPECT_EQ(st.hits, 1);
  EXPECT_GT(st.bytes, replica->summary().state_bytes_per_slot);
  replica->Shutdown();
}

TEST(SnapshotExchangeServiceTest, APeerDownMeansAPrefill) {
  std::string gone;
  Conversation c;
  {
    Exporter peer;
    c = FirstTurn(*peer.engine);
    gone = peer.address();
  }                // nothing listens there any more
  Exporter empty;  // up, but never saw the conversation
  auto replica = MakeEngine(64 << 20);
  ASSERT_TRUE(
      replica->SetSnapshotPeers(Client({gone, empty.address()}), 8).ok());
  const Result r = RunGreedy(*replica, c.p2, 8);
  EXPECT_EQ(r.cached, 0);
  EXPECT_EQ(r.tokens, c.whole.tokens);
  PeerFetchStats st = replica->Stats().peer_fetch;
  EXPECT_EQ(st.fetches, 1);
  EXPECT_EQ(st.misses, 1);  // one peer answered: it has none
  auto alone = MakeEngine(64 << 20);
  ASSERT_TRUE(alone->SetSnapshotPeers(Client({gone}), 8).ok());
  EXPECT_EQ(RunGreedy(*alone, c.p2, 8).tokens, c.whole.tokens);
  st = alone->Stats().peer_fetch;
  EXPECT_EQ(st.failed, 1);
  replica->Shutdown();
  alone->Shutdown();
}

TEST(SnapshotExchangeServiceTest, OnlyThePeersTenantMayExport) {
  const std::string path = absl::StrCat(testing::TempDir(), "/peer_keys");
  std::ofstream(path) << kPeerKey << " peers\n" << kTenantKey << " alice\n";
  auto keys = ApiKeyStore::Open(path);
  ASSERT_TRUE(keys.ok()) << keys.status();
  Exporter peer(keys->get());
  const Conversation c = FirstTurn(*peer.engine);
  auto call = [&](const std::string& key) {
    auto stub = v1::SnapshotExchange::NewStub(CreateChannelWithApiKey(
        peer.address(), grpc::InsecureChannelCredentials(),
        grpc::ChannelArguments(), key));
    grpc::ClientContext context;
    v1::ExportSnapshotRequest request;
    request.mutable_token_ids()->Add(c.p2.begin(), c.p2.end() - 1);
    v1::ExportSnapshotResponse response;
    const grpc::Status s = stub->ExportSnapshot(&context, request, &response);
    return std::make_pair(s, response);
  };
  EXPECT_EQ(call("").first.error_code(), grpc::StatusCode::UNAUTHENTICATED);
  EXPECT_EQ(call(kTenantKey).first.error_code(),
            grpc::StatusCode::PERMISSION_DENIED);
  const auto [status, response] = call(kPeerKey);
  ASSERT_TRUE(status.ok()) << status.error_message();
  EXPECT_EQ(response.tokens(), 40u + 6 - 1);
  // The client sends its key: a replica resumes from the export.
  auto replica = MakeEngine(64 << 20);
  ASSERT_TRUE(
      replica->SetSnapshotPeers(Client({peer.address()}, kPeerKey), 8).ok());
  EXPECT_EQ(RunGreedy(*replica, c.p2, 8).cached, 40 + 6 - 1);
  replica->Shutdown();
}

std::string FileText(const std::string& path) {
  absl::StatusOr<std::string> text = ReadFileText(path, 1 << 16);
  EXPECT_TRUE(text.ok()) << text.status();
  return text.value_or("");
}

// Replicas on mutual TLS that share one certificate, issued for their
// Service's name rather than each replica's address: a peer client told
// that name resumes from the export; one that checks the address fails its
// handshake and prefills.
TEST(SnapshotExchangeServiceTest, PeersSharingOneCertificateNameResumeOverTls) {
  const std::string dir = testing::TempDir();
  auto ca = MakeTestCa(dir, "peer_ca");
  ASSERT_TRUE(ca.ok()) << ca.status();
  auto server =
      MakeTestCert(dir, "replicas", *ca, /*server=*/true, "seqboat-replicas");
  ASSERT_TRUE(server.ok()) << server.status();
  auto client = MakeTestCert(dir, "peer_client", *ca, /*server=*/false);
  ASSERT_TRUE(client.ok()) << client.status();
  grpc::SslServerCredentialsOptions server_ssl(
      GRPC_SSL_REQUEST_AND_REQUIRE_CLIENT_CERTIFICATE_AND_VERIFY);
  server_ssl.pem_root_certs = FileText(ca->cert);
  server_ssl.pem_key_cert_pairs.push_back(
      {FileText(server->key), FileText(server->cert)});
  Exporter peer(nullptr, grpc::SslServerCredentials(server_ssl));
  const Conversation c = FirstTurn(*peer.engine);
  auto tls_client = [&](const std::string& server_name) {
    SnapshotPeerOptions o;
    o.peers = {peer.address()};
    o.deadline = absl::Seconds(5);
    grpc::SslCredentialsOptions ssl;
    ssl.pem_root_certs = FileText(ca->cert);
    ssl.pem_cert_chain = FileText(client->cert);
    ssl.pem_private_key = FileText(client->key);
    o.credentials = grpc::SslCredentials(ssl);
    o.tls_server_name = server_name;
    return std::make_shared<SnapshotPeerClient>(std::move(o));
  };
  auto named = MakeEngine(64 << 20);
  ASSERT_TRUE(named->SetSnapshotPeers(tls_client("seqboat-replicas"), 8).ok());
  const Result r = RunGreedy(*named, c.p2, 8);
  EXPECT_EQ(r.cached, 40 + 6 - 1);
  EXPECT_EQ(r.tokens, c.whole.tokens);
  EXPECT_EQ(named->Stats().peer_fetch.hits, 1);
  auto by_address = MakeEngine(64 << 20);
  ASSERT_TRUE(by_address->SetSnapshotPeers(tls_client(""), 8).ok());
  const Result p = RunGreedy(*by_address, c.p2, 8);
  EXPECT_EQ(p.cached, 0);
  EXPECT_EQ(p.tokens, c.whole.tokens);
  EXPECT_EQ(by_address->Stats().peer_fetch.failed, 1);
  named->Shutdown();
  by_address->Shutdown();
}

}  // namespace
}  // namespace seqboat
