// The TLS files' checks (each refusal names the file at fault) and reload:
// a good reading replaces the current credentials, a bad one leaves them.
// Certificates are made at test time by the openssl command.
#include "server/https_credentials.h"

#include <cstdlib>
#include <fstream>
#include <string>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"

namespace seqboat {
namespace {

std::string TempDir() {
  const char* dir = std::getenv("TEST_TMPDIR");
  return dir != nullptr ? dir : "/tmp";
}

// A self-signed certificate and its key under `name`.crt and `name`.key.
void MakeSelfSigned(const std::string& name) {
  const std::string base = absl::StrCat(TempDir(), "/", name);
  const std::string command = absl::StrCat(
      "openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes "
      "-days 1 -subj /CN=",
      name, " -keyout ", base, ".key -out ", base, ".crt 2>/dev/null");
  ASSERT_EQ(std::system(command.c_str()), 0) << command;
}

std::string Path(const std::string& file) {
  return absl::StrCat(TempDir(), "/", file);
}

void Write(const std::string& file, const std::string& text) {
  std::ofstream(Path(file)) << text;
}

TEST(HttpsCredentialsTest, OpensACertificateItsKeyAndAClientCa) {
  MakeSelfSigned("server");
  MakeSelfSigned("ca");
  auto tls = HttpsCredentials::Open(
      {Path("server.crt"), Path("server.key"), Path("ca.crt")});
  ASSERT_TRUE(tls.ok()) << tls.status();
  EXPECT_TRUE((*tls)->files().mutual());
  EXPECT_EQ(HttpsCredentials::DaemonFlags(tls->get()),
            static_cast<unsigned>(MHD_USE_TLS));
  // Certificate, key, the connection hook, the end.
  EXPECT_EQ(HttpsCredentials::DaemonOptions(tls->get()).size(), 4u);
  EXPECT_EQ(HttpsCredentials::DaemonFlags(nullptr), 0u);
  EXPECT_EQ(HttpsCredentials::DaemonOptions(nullptr).size(), 1u);
}

TEST(HttpsCredentialsTest, RefusalsNameTheFileAtFault) {
  MakeSelfSigned("one");
  MakeSelfSigned("other");
  Write("not_pem.txt", "not a certificate\n");
  const struct {
    TlsFiles files;
    std::string names;
  } cases[] = {
      {{Path("missing.crt"), Path("one.key"), ""}, "missing.crt"},
      {{Path("one.crt"), Path("missing.key"), ""}, "missing.key"},
      {{Path("not_pem.txt"), Path("one.key"), ""}, "not_pem.txt"},
      {{Path("one.crt"), "", ""}, "key file"},
      // A key that is not the certificate's.
      {{Path("one.crt"), Path("other.key"), ""}, "other.key"},
      {{Path("one.crt"), Path("one.key"), Path("not_pem.txt")}, "not_pem.txt"},
      // PEM, but no certificate in it.
      {{Path("one.crt"), Path("one.key"), Path("one.key")}, "client CA"},
  };
  for (const auto& c : cases) {
    auto tls = HttpsCredentials::Open(c.files);
    ASSERT_FALSE(tls.ok()) << c.names;
    EXPECT_TRUE(absl::StrContains(tls.status().message(), c.names))
        << tls.status();
  }
}

TEST(HttpsCredentialsTest, ABrokenReloadKeepsTheLastCredentials) {
  MakeSelfSigned("reload");
  auto tls = HttpsCredentials::Open({Path("reload.crt"), Path("reload.key")});
  ASSERT_TRUE(tls.ok()) << tls.status();
  MakeSelfSigned("reload");  // new files in place
  EXPECT_TRUE((*tls)->Reload().ok());
  Write("reload.key", "-----BEGIN PRIVATE KEY-----\nbroken\n");
  absl::Status broken = (*tls)->Reload();
  EXPECT_FALSE(broken.ok());
  EXPECT_TRUE(absl::StrContains(broken.message(), "reload.key")) << broken;
}

}  // namespace
}  // namespace seqboat
