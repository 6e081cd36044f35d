// A C++ client's --tls_* flags (defined here) and its channel credentials:
// plaintext when none is set; TLS trusting the CAs of `ca_file` (else the
// system's roots) when any is; for mutual TLS, the client's PEM certificate
// chain and key.
#ifndef SEQBOAT_CLIENTS_COMMON_TLS_H_
#define SEQBOAT_CLIENTS_COMMON_TLS_H_

#include <grpcpp/security/credentials.h>

#include <memory>
#include <string>

#include "absl/status/statusor.h"

namespace seqboat {

struct ClientTlsFiles {
  std::string ca_file;
  std::string cert_file;
  std::string key_file;
  bool enabled() const {
    return !ca_file.empty() || !cert_file.empty() || !key_file.empty();
  }
};

// The files of the --tls_ca_file, --tls_cert_file and --tls_key_file flags,
// which this unit defines for every client that links it.
ClientTlsFiles ClientTlsFilesFromFlags();

// An unreadable file, or a certificate without its key (or the other way
// round), is an error naming it.
absl::StatusOr<std::shared_ptr<grpc::ChannelCredentials>>
ChannelCredentialsFrom(const ClientTlsFiles& files);

}  // namespace seqboat

#endif  // SEQBOAT_CLIENTS_COMMON_TLS_H_
