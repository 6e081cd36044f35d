#include "server/https_credentials.h"

#include <gnutls/gnutls.h>
#include <sys/socket.h>

#include <fstream>
#include <sstream>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"

namespace seqboat {

// gnutls' credentials of one reading of the files. gnutls reads them during
// a session's handshake (and keeps pointers into them for its life), so each
// connection holds a reference to the generation it was given.
struct HttpsCredentials::Generation {
  gnutls_certificate_credentials_t credentials = nullptr;
  bool mutual = false;
  ~Generation() {
    if (credentials != nullptr)
      gnutls_certificate_free_credentials(credentials);
  }
};

namespace {

using Generation = HttpsCredentials::Generation;

gnutls_datum_t Datum(const std::string& text) {
  return {reinterpret_cast<unsigned char*>(const_cast<char*>(text.data())),
          static_cast<unsigned int>(text.size())};
}

struct Pem {
  std::string cert, key, client_ca;
};

absl::StatusOr<Pem> ReadFiles(const TlsFiles& files) {
  if (files.cert_file.empty() || files.key_file.empty()) {
    return absl::InvalidArgumentError(
        "TLS needs both a certificate file and a key file");
  }
  Pem pem;
  absl::StatusOr<std::string> text =
      ReadPemFile(files.cert_file, "certificate");
  if (!text.ok()) return text.status();
  pem.cert = *std::move(text);
  text = ReadPemFile(files.key_file, "key");
  if (!text.ok()) return text.status();
  pem.key = *std::move(text);
  if (files.mutual()) {
    text = ReadPemFile(files.client_ca_file, "client CA");
    if (!text.ok()) return text.status();
    pem.client_ca = *std::move(text);
  }
  return pem;
}

absl::StatusOr<std::shared_ptr<const Generation>> MakeGeneration(
    const TlsFiles& files, const Pem& pem) {
  auto generation = std::make_shared<Generation>();
  if (int rc =
          gnutls_certificate_allocate_credentials(&generation->credentials);
      rc < 0) {
    generation->credentials = nullptr;
    return absl::InternalError(
        absl::StrCat("TLS credentials: ", gnutls_strerror(rc)));
  }
  const gnutls_datum_t cert = Datum(pem.cert);
  const gnutls_datum_t key = Datum(pem.key);
  // gnutls refuses a key that is not the certificate's.
  if (int rc = gnutls_certificate_set_x509_key_mem2(
          generation->credentials, &cert, &key, GNUTLS_X509_FMT_PEM, nullptr,
          0);
      rc < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("TLS certificate ", files.cert_file, " with key ",
                     files.key_file, ": ", gnutls_strerror(rc)));
  }
  if (files.mutual()) {
    const gnutls_datum_t ca = Datum(pem.client_ca);
    const int count = gnutls_certificate_set_x509_trust_mem(
        generation->credentials, &ca, GNUTLS_X509_FMT_PEM);
    if (count <= 0) {
      return absl::InvalidArgumentError(absl::StrCat(
          "TLS client CA file ", files.client_ca_file, ": ",
          count < 0 ? gnutls_strerror(count) : "no certificate in it"));
    }
    generation->mutual = true;
  }
  return std::shared_ptr<const Generation>(std::move(generation));
}

}  // namespace

absl::StatusOr<std::string> ReadPemFile(const std::string& path,
                                        const char* what) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    return absl::NotFoundError(
        absl::StrCat("TLS ", what, " file ", path, " cannot be read"));
  }
  std::stringstream text;
  text << in.rdbuf();
  if (!absl::StrContains(text.str(), "-----BEGIN ")) {
    return absl::InvalidArgumentError(
        absl::StrCat("TLS ", what, " file ", path, " holds no PEM block"));
  }
  return text.str();
}

absl::StatusOr<std::unique_ptr<HttpsCredentials>> HttpsCredentials::Open(
    TlsFiles files) {
  absl::StatusOr<Pem> pem = ReadFiles(files);
  if (!pem.ok()) return pem.status();
  absl::StatusOr<std::shared_ptr<const Generation>> generation =
      MakeGeneration(files, *pem);
  if (!generation.ok()) return generation.status();
  std::unique_ptr<HttpsCredentials> tls(new HttpsCredentials(std::move(files)));
  tls->first_cert_pem_ = std::move(pem->cert);
  tls->first_key_pem_ = std::move(pem->key);
  tls->current_ = *std::move(generation);
  return tls;
}

HttpsCredentials::~HttpsCredentials() = default;

absl::Status HttpsCredentials::Reload() {
  absl::StatusOr<Pem> pem = ReadFiles(files_);
  if (!pem.ok()) return pem.status();
  absl::StatusOr<std::shared_ptr<const Generation>> generation =
      MakeGeneration(files_, *pem);
  if (!generation.ok()) return generation.status();
  absl::MutexLock lock(&mu_);
  current_ = *std::move(generation);
  return absl::OkStatus();
}

unsigned int HttpsCredentials::DaemonFlags(const HttpsCredentials* tls) {
  return tls != nullptr ? MHD_USE_TLS : 0;
}

std::vector<MHD_OptionItem> HttpsCredentials::DaemonOptions(
    HttpsCredentials* tls) {
  std::vector<MHD_OptionItem> options;
  if (tls != nullptr) {
    options.push_back({MHD_OPTION_HTTPS_MEM_CERT, 0,
                       const_cast<char*>(tls->first_cert_pem_.c_str())});
    options.push_back({MHD_OPTION_HTTPS_MEM_KEY, 0,
                       const_cast<char*>(tls->first_key_pem_.c_str())});
    options.push_back({MHD_OPTION_NOTIFY_CONNECTION,
                       reinterpret_cast<intptr_t>(&OnConnection), tls});
  }
  options.push_back({MHD_OPTION_END, 0, nullptr});
  return options;
}

// MHD has set up the connection's TLS session (with its own credentials of
// the first reading) and not yet read a byte of the handshake: the session
// is given the current generation instead, and under mutual TLS a client
// certificate is required and verified against its CAs during the
// handshake. The connection keeps its generation until it closes.
void HttpsCredentials::OnConnection(void* cls, MHD_Connection* connection,
                                    void** socket_context,
                                    MHD_ConnectionNotificationCode code) {
  auto* tls = static_cast<HttpsCredentials*>(cls);
  if (code == MHD_CONNECTION_NOTIFY_CLOSED) {
    delete static_cast<std::shared_ptr<const Generation>*>(*socket_context);
    *socket_context = nullptr;
    return;
  }
  std::shared_ptr<const Generation> generation;
  {
    absl::MutexLock lock(&tls->mu_);
    generation = tls->current_;
  }
  const MHD_ConnectionInfo* info =
      MHD_get_connection_info(connection, MHD_CONNECTION_INFO_GNUTLS_SESSION);
  auto session = static_cast<gnutls_session_t>(
      info != nullptr ? info->tls_session : nullptr);
  if (session == nullptr ||
      gnutls_credentials_set(session, GNUTLS_CRD_CERTIFICATE,
                             generation->credentials) < 0) {
    // Never serve a connection with credentials other than the current
    // ones (the client CA above all): end it before its handshake.
    const MHD_ConnectionInfo* fd =
        MHD_get_connection_info(connection, MHD_CONNECTION_INFO_CONNECTION_FD);
    if (fd != nullptr) shutdown(fd->connect_fd, SHUT_RDWR);
    return;
  }
  if (generation->mutual) {
    gnutls_certificate_server_set_request(session, GNUTLS_CERT_REQUIRE);
    gnutls_session_set_verify_cert(session, nullptr, 0);
  }
  *socket_context =
      new std::shared_ptr<const Generation>(std::move(generation));
}

}  // namespace seqboat
