#include "clients/common/tls.h"

#include <openssl/crypto.h>

#include <fstream>
#include <sstream>

#include "absl/flags/flag.h"
#include "absl/strings/str_cat.h"

ABSL_FLAG(std::string, tls_ca_file, "",
          "PEM CAs to trust; any --tls_* flag connects with TLS (without "
          "this one, trusting the system's roots).");
ABSL_FLAG(std::string, tls_cert_file, "",
          "Mutual TLS: this client's PEM certificate chain.");
ABSL_FLAG(std::string, tls_key_file, "", "The PEM key of --tls_cert_file.");

namespace seqboat {
namespace {

absl::StatusOr<std::string> ReadPem(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return absl::NotFoundError(absl::StrCat("cannot read ", path));
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

}  // namespace

ClientTlsFiles ClientTlsFilesFromFlags() {
  return {absl::GetFlag(FLAGS_tls_ca_file), absl::GetFlag(FLAGS_tls_cert_file),
          absl::GetFlag(FLAGS_tls_key_file)};
}

absl::StatusOr<std::shared_ptr<grpc::ChannelCredentials>>
ChannelCredentialsFrom(const ClientTlsFiles& files) {
  // gRPC's resolver threads are never joined (the C++ library keeps gRPC
  // initialised to the end), and one may be parsing the CA file to connect
  // again when main returns: OpenSSL's exit handler then frees what it reads,
  // and the client crashed at exit about one run in thirty after a failed
  // connection. OpenSSL's memory goes back with the process instead. Asked
  // before gRPC first initialises OpenSSL, for plaintext channels too.
  OPENSSL_init_crypto(OPENSSL_INIT_NO_ATEXIT, nullptr);
  if (!files.enabled()) return grpc::InsecureChannelCredentials();
  if (files.cert_file.empty() != files.key_file.empty()) {
    return absl::InvalidArgumentError(
        "--tls_cert_file and --tls_key_file go together");
  }
  grpc::SslCredentialsOptions ssl;
  for (const auto& [path, field] :
       {std::pair{&files.ca_file, &ssl.pem_root_certs},
        std::pair{&files.cert_file, &ssl.pem_cert_chain},
        std::pair{&files.key_file, &ssl.pem_private_key}}) {
    if (path->empty()) continue;
    absl::StatusOr<std::string> pem = ReadPem(*path);
    if (!pem.ok()) return pem.status();
    *field = *std::move(pem);
  }
  return grpc::SslCredentials(ssl);
}

}  // namespace seqboat
