#include "server/grpc_tls.h"

#include <grpcpp/security/tls_certificate_provider.h>
#include <grpcpp/security/tls_credentials_options.h>

#include "absl/strings/str_cat.h"

namespace seqboat {

absl::StatusOr<std::shared_ptr<grpc::ServerCredentials>> GrpcServerCredentials(
    const TlsFiles& files, int refresh_seconds) {
  if (!files.enabled()) {
    if (!files.key_file.empty() || files.mutual()) {
      return absl::InvalidArgumentError(
          "a TLS key or client CA file needs a certificate file too");
    }
    return grpc::InsecureServerCredentials();
  }
  if (refresh_seconds < 1) {
    return absl::InvalidArgumentError(absl::StrCat(
        "the TLS refresh interval must be >= 1 s, got ", refresh_seconds));
  }
  // gRPC's watcher would only log a file it cannot use, and fail every
  // handshake: read and check them the way the HTTP ports do.
  absl::StatusOr<std::unique_ptr<HttpsCredentials>> checked =
      HttpsCredentials::Open(files);
  if (!checked.ok()) return checked.status();
  auto provider =
      std::make_shared<grpc::experimental::FileWatcherCertificateProvider>(
          files.key_file, files.cert_file, files.client_ca_file,
          static_cast<unsigned int>(refresh_seconds));
  grpc::experimental::TlsServerCredentialsOptions options(provider);
  options.watch_identity_key_cert_pairs();
  if (files.mutual()) {
    options.watch_root_certs();
    options.set_cert_request_type(
        GRPC_SSL_REQUEST_AND_REQUIRE_CLIENT_CERTIFICATE_AND_VERIFY);
  } else {
    options.set_cert_request_type(GRPC_SSL_DONT_REQUEST_CLIENT_CERTIFICATE);
  }
  return grpc::experimental::TlsServerCredentials(options);
}

}  // namespace seqboat
