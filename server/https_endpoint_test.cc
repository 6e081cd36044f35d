// The HTTP side port over TLS, with certificates made by openssl at test
// time and cpp-httplib's OpenSSL client: a round trip; mutual TLS refusing a
// client without a certificate or with one of another CA; plaintext
// refused; Reload serving a new certificate to new connections (that a
// connection open across the reload goes on, streaming, is
// tests/python/client/test_tls.py's, whose clients keep theirs open).
#define CPPHTTPLIB_OPENSSL_SUPPORT
#include <httplib.h>
#include <signal.h>

#include <cstdlib>
#include <memory>
#include <string>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "server/http_endpoint.h"
#include "server/https_credentials.h"
#include "server/testing/test_certs.h"

namespace seqboat {
namespace {

std::string TempDir() {
  const char* dir = std::getenv("TEST_TMPDIR");
  return dir != nullptr ? dir : "/tmp";
}

HttpEndpoint::Handlers Trivial() {
  HttpEndpoint::Handlers handlers;
  handlers.metrics = [] { return std::string("m 1\n"); };
  handlers.ready = [] { return true; };
  return handlers;
}

// A client of `port` trusting `ca`, presenting `client` when given.
std::unique_ptr<httplib::SSLClient> Client(int port, const std::string& ca,
                                           const CertFiles* client) {
  auto c = client != nullptr
               ? std::make_unique<httplib::SSLClient>("127.0.0.1", port,
                                                      client->cert, client->key)
               : std::make_unique<httplib::SSLClient>("127.0.0.1", port);
  c->set_ca_cert_path(ca.c_str());
  c->enable_server_certificate_verification(true);
  c->set_connection_timeout(5);
  c->set_read_timeout(5);
  return c;
}

class HttpsEndpointTest : public ::testing::Test {
 protected:
  void SetUp() override {
    // httplib's OpenSSL client writes its request to a socket the server
    // closed after refusing its handshake; that must fail the call, not
    // end the test (libmicrohttpd suppresses SIGPIPE on its own side).
    signal(SIGPIPE, SIG_IGN);
    dir_ = TempDir();
    auto ca = MakeTestCa(dir_, "ca");
    ASSERT_TRUE(ca.ok()) << ca.status();
    ca_ = *ca;
    auto server = MakeTestCert(dir_, "server", ca_, /*server=*/true);
    ASSERT_TRUE(server.ok()) << server.status();
    server_ = *server;
    auto client = MakeTestCert(dir_, "client", ca_, /*server=*/false);
    ASSERT_TRUE(client.ok()) << client.status();
    client_ = *client;
  }

  std::string dir_;
  CertFiles ca_, server_, client_;
};

TEST_F(HttpsEndpointTest, ServesOverTlsAndRefusesPlaintext) {
  auto tls = HttpsCredentials::Open({server_.cert, server_.key});
  ASSERT_TRUE(tls.ok()) << tls.status();
  auto endpoint = HttpEndpoint::Start("127.0.0.1", 0, Trivial(), tls->get());
  ASSERT_TRUE(endpoint.ok()) << endpoint.status();
  auto got = Client((*endpoint)->port(), ca_.cert, nullptr)->Get("/metrics");
  ASSERT_TRUE(got) << httplib::to_string(got.error());
  EXPECT_EQ(got->status, 200);
  EXPECT_EQ(got->body, "m 1\n");

  httplib::Client plain("127.0.0.1", (*endpoint)->port());
  plain.set_connection_timeout(5);
  plain.set_read_timeout(5);
  EXPECT_FALSE(plain.Get("/healthz"));
}

TEST_F(HttpsEndpointTest, MutualTlsWantsACertificateOfTheClientCa) {
  auto other_ca = MakeTestCa(dir_, "other_ca");
  ASSERT_TRUE(other_ca.ok()) << other_ca.status();
  auto stranger = MakeTestCert(dir_, "stranger", *other_ca, /*server=*/false);
  ASSERT_TRUE(stranger.ok()) << stranger.status();
  auto tls = HttpsCredentials::Open({server_.cert, server_.key, ca_.cert});
  ASSERT_TRUE(tls.ok()) << tls.status();
  auto endpoint = HttpEndpoint::Start("127.0.0.1", 0, Trivial(), tls->get());
  ASSERT_TRUE(endpoint.ok()) << endpoint.status();
  const int port = (*endpoint)->port();

  auto got = Client(port, ca_.cert, &client_)->Get("/healthz");
  ASSERT_TRUE(got) << httplib::to_string(got.error());
  EXPECT_EQ(got->status, 200);
  EXPECT_FALSE(Client(port, ca_.cert, nullptr)->Get("/healthz"));
  EXPECT_FALSE(Client(port, ca_.cert, &*stranger)->Get("/healthz"));
}

TEST_F(HttpsEndpointTest, ReloadServesNewConnectionsTheNewCertificate) {
  const std::string cert = dir_ + "/live.crt", key = dir_ + "/live.key";
  ASSERT_EQ(std::system(absl::StrCat("cp ", server_.cert, " ", cert, " && cp ",
                                     server_.key, " ", key)
                            .c_str()),
            0);
  auto tls = HttpsCredentials::Open({cert, key});
  ASSERT_TRUE(tls.ok()) << tls.status();
  auto endpoint = HttpEndpoint::Start("127.0.0.1", 0, Trivial(), tls->get());
  ASSERT_TRUE(endpoint.ok()) << endpoint.status();
  const int port = (*endpoint)->port();
  ASSERT_TRUE(Client(port, ca_.cert, nullptr)->Get("/healthz"));

  // A certificate of another CA replaces the files.
  auto new_ca = MakeTestCa(dir_, "new_ca");
  ASSERT_TRUE(new_ca.ok()) << new_ca.status();
  auto renewed = MakeTestCert(dir_, "renewed", *new_ca, /*server=*/true);
  ASSERT_TRUE(renewed.ok()) << renewed.status();
  ASSERT_EQ(std::system(absl::StrCat("cp ", renewed->cert, " ", cert, " && cp ",
                                     renewed->key, " ", key)
                            .c_str()),
            0);
  ASSERT_TRUE((*tls)->Reload().ok());

  auto fresh = Client(port, new_ca->cert, nullptr)->Get("/healthz");
  ASSERT_TRUE(fresh) << httplib::to_string(fresh.error());
  EXPECT_EQ(fresh->status, 200);
  EXPECT_FALSE(Client(port, ca_.cert, nullptr)->Get("/healthz"));
  // A broken file leaves the new certificate serving.
  ASSERT_EQ(std::system(absl::StrCat("echo broken > ", key).c_str()), 0);
  EXPECT_FALSE((*tls)->Reload().ok());
  EXPECT_TRUE(Client(port, new_ca->cert, nullptr)->Get("/healthz"));
}

}  // namespace
}  // namespace seqboat
