// The secrets the server reads from files at start and again on SIGHUP: the
// API keys files and the TLS files of the HTTP ports (the gRPC port's own
// watcher rereads those on its interval). A file broken at start stops the
// start, naming it; one broken at a reload leaves what it held serving, and
// the log says where it is broken. Keys are never logged.
#ifndef SEQBOAT_SERVER_SECRET_FILES_H_
#define SEQBOAT_SERVER_SECRET_FILES_H_

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "server/api_keys.h"
#include "server/https_credentials.h"

namespace seqboat {

// The keys of `path` (null when it is empty: no keys asked for).
absl::StatusOr<std::unique_ptr<ApiKeyStore>> OpenKeys(const std::string& path);

// The HTTP ports' TLS: the OpenAI port's, and the metrics and probes port's,
// which is the same unless it asks for no client certificate where the
// OpenAI port does (kubelet's HTTPS probes present none).
struct HttpsPorts {
  std::unique_ptr<HttpsCredentials> api;  // null: plaintext
  std::unique_ptr<HttpsCredentials> side_without_client_certs;
  HttpsCredentials* side() const {
    return side_without_client_certs != nullptr
               ? side_without_client_certs.get()
               : api.get();
  }
};

absl::StatusOr<HttpsPorts> OpenTls(const TlsFiles& files,
                                   bool side_port_client_certs);

// What SIGHUP reads again.
struct Reloadable {
  std::vector<ApiKeyStore*> keys;      // nulls skipped
  std::vector<HttpsCredentials*> tls;  // nulls skipped
  int grpc_tls_refresh_seconds = 0;    // for the log
};

void Reload(const Reloadable& reloadable);

}  // namespace seqboat

#endif  // SEQBOAT_SERVER_SECRET_FILES_H_
