// TLS all the way through the balancer: two seqboat_server replicas serving
// gRPC over mutual TLS (their client CA signs nginx's certificate), Debian's
// nginx terminating the clients' TLS and opening its own to the replicas
// (grpc_pass grpcs://, grpc_ssl_verify against the replicas' CA), and the
// seqboat_load client trusting nginx's CA. Certificates are made at test time
// by openssl. Every stream completes to its last token, both replicas serve,
// and a replica refuses the same streams sent to it without nginx's client
// certificate.
#include <signal.h>

#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "server/testing/test_certs.h"
#include "tests/lb/child_process.h"
#include "tests/lb/cluster.h"

namespace seqboat {
namespace {

constexpr int kReplicas = 2;
constexpr int kRequests = 24;
constexpr int kOutputLen = 16;

std::string MakeTempDir() {
  const char* base = std::getenv("TEST_TMPDIR");
  std::string tmpl =
      absl::StrCat(base != nullptr ? base : "/tmp", "/lbtls_XXXXXX");
  if (mkdtemp(tmpl.data()) == nullptr) return "";
  return tmpl;
}

class LbTlsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = MakeTempDir();
    ASSERT_FALSE(dir_.empty());
    // One CA for the replicas' side, another for the clients' side.
    auto replica_ca = MakeTestCa(dir_, "replica_ca");
    ASSERT_TRUE(replica_ca.ok()) << replica_ca.status();
    auto replica = MakeTestCert(dir_, "replica", *replica_ca, /*server=*/true);
    ASSERT_TRUE(replica.ok()) << replica.status();
    auto nginx_client =
        MakeTestCert(dir_, "nginx_client", *replica_ca, /*server=*/false);
    ASSERT_TRUE(nginx_client.ok()) << nginx_client.status();
    auto front_ca = MakeTestCa(dir_, "front_ca");
    ASSERT_TRUE(front_ca.ok()) << front_ca.status();
    auto front = MakeTestCert(dir_, "front", *front_ca, /*server=*/true);
    ASSERT_TRUE(front.ok()) << front.status();
    replica_ca_ = replica_ca->cert;
    front_ca_ = front_ca->cert;

    std::vector<std::string> upstreams;
    for (int i = 0; i < kReplicas; ++i) {
      auto r = StartReplica(
          dir_, i,
          {"--max_slots=8", "--cpu_threads=1",
           "--tls_cert_file=" + replica->cert, "--tls_key_file=" + replica->key,
           "--tls_client_ca_file=" + replica_ca->cert});
      ASSERT_TRUE(r.ok()) << r.status();
      upstreams.push_back(r->grpc_address);
      replicas_.push_back(*std::move(r));
    }
    const NginxTls tls{front->cert, front->key, replica_ca->cert,
                       nginx_client->cert, nginx_client->key};
    auto nginx = StartNginx(dir_, upstreams, &lb_port_, "", &tls);
    ASSERT_TRUE(nginx.ok()) << nginx.status();
    nginx_ = *std::move(nginx);
  }

  void TearDown() override { StopCluster(nginx_.get(), replicas_); }

  // seqboat_load's summary of kRequests streams to `target` trusting `ca`,
  // and its exit code.
  nlohmann::json Load(const std::string& target, const std::string& ca,
                      const std::string& name, std::optional<int>* code) {
    const std::string result = absl::StrCat(dir_, "/", name, ".json");
    auto load = ChildProcess::Start(
        {"clients/load/seqboat_load", "--target=" + target,
         "--tls_ca_file=" + ca, "--concurrency=4",
         absl::StrCat("--num_requests=", kRequests), "--input_len=16",
         absl::StrCat("--output_len=", kOutputLen), "--seed=7",
         "--request_timeout_s=120", "--progress=false", "--save_requests",
         "--result_json=" + result},
        absl::StrCat(dir_, "/", name, ".stdout"),
        absl::StrCat(dir_, "/", name, ".stderr"));
    EXPECT_TRUE(load.ok()) << load.status();
    if (!load.ok()) return nullptr;
    *code = (*load)->WaitForExit(absl::Seconds(240));
    return nlohmann::json::parse(ReadFileOrEmpty(result), nullptr, false);
  }

  std::string dir_, replica_ca_, front_ca_;
  std::vector<Replica> replicas_;
  int lb_port_ = 0;
  std::unique_ptr<ChildProcess> nginx_;
};

TEST_F(LbTlsTest, StreamsGoThroughTlsOnBothSidesOfTheBalancer) {
  std::optional<int> code;
  const nlohmann::json out = Load(absl::StrCat("127.0.0.1:", lb_port_),
                                  front_ca_, "through_nginx", &code);
  EXPECT_EQ(code, 0);
  ASSERT_FALSE(out.is_discarded() || out.is_null())
      << ReadFileOrEmpty(dir_ + "/error.log");
  EXPECT_EQ(out["completed"], kRequests)
      << ReadFileOrEmpty(dir_ + "/error.log");
  EXPECT_EQ(out["failed"], 0);
  EXPECT_EQ(out["total_output_tokens"], kRequests * kOutputLen);
  std::set<std::string> served;
  for (const Replica& r : replicas_) {
    const std::vector<std::string> ids =
        AcceptedRequestIds(ReadFileOrEmpty(r.process->stderr_path()));
    EXPECT_FALSE(ids.empty()) << r.grpc_address << " served no stream";
    served.insert(ids.begin(), ids.end());
  }
  EXPECT_EQ(served.size(), static_cast<size_t>(kRequests));
}

TEST_F(LbTlsTest, AReplicaRefusesStreamsWithoutAClientCertificate) {
  // The replicas' CA is trusted, but the load client has no certificate.
  std::optional<int> code;
  const nlohmann::json out = Load(replicas_[0].grpc_address, replica_ca_,
                                  "direct_without_cert", &code);
  // The load client cannot even read the model's info: it fails, and writes
  // no summary or one of failures only.
  ASSERT_TRUE(code.has_value());
  EXPECT_NE(*code, 0);
  if (!out.is_discarded() && !out.is_null()) {
    EXPECT_EQ(out["completed"], 0);
  }
  EXPECT_TRUE(
      AcceptedRequestIds(ReadFileOrEmpty(replicas_[0].process->stderr_path()))
          .empty());
}

}  // namespace
}  // namespace seqboat
