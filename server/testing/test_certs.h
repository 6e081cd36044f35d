// Test certificates made by the openssl command (Debian's openssl) at test
// time: a CA, and PEM certificates it signs for a server on 127.0.0.1 and
// localhost or for a client (mutual TLS).
#ifndef SEQBOAT_SERVER_TESTING_TEST_CERTS_H_
#define SEQBOAT_SERVER_TESTING_TEST_CERTS_H_

#include <string>

#include "absl/status/statusor.h"

namespace seqboat {

struct CertFiles {
  std::string cert;  // PEM
  std::string key;   // PEM
};

// A self-signed CA as `dir`/`name`.crt and .key.
absl::StatusOr<CertFiles> MakeTestCa(const std::string& dir,
                                     const std::string& name);

// A certificate `ca` signs, for a server (serverAuth, 127.0.0.1 and
// localhost, or only the DNS name `server_name` when one is given) or a
// client (clientAuth), as `dir`/`name`.crt and .key.
absl::StatusOr<CertFiles> MakeTestCert(const std::string& dir,
                                       const std::string& name,
                                       const CertFiles& ca, bool server,
                                       const std::string& server_name = "");

}  // namespace seqboat

#endif  // SEQBOAT_SERVER_TESTING_TEST_CERTS_H_
