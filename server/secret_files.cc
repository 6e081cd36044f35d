#include "server/secret_files.h"

#include "base/status_macros.h"
#include "spdlog/spdlog.h"

namespace seqboat {

absl::StatusOr<std::unique_ptr<ApiKeyStore>> OpenKeys(const std::string& path) {
  if (path.empty()) return nullptr;
  ASSIGN_OR_RETURN(std::unique_ptr<ApiKeyStore> keys, ApiKeyStore::Open(path));
  spdlog::info("{} API keys from {}", keys->size(), path);
  return keys;
}

absl::StatusOr<HttpsPorts> OpenTls(const TlsFiles& files,
                                   bool side_port_client_certs) {
  HttpsPorts ports;
  if (!files.enabled()) return ports;
  ASSIGN_OR_RETURN(ports.api, HttpsCredentials::Open(files));
  if (files.mutual() && !side_port_client_certs) {
    ASSIGN_OR_RETURN(ports.side_without_client_certs,
                     HttpsCredentials::Open({files.cert_file, files.key_file}));
  }
  spdlog::info("TLS on every port from {}{}", files.cert_file,
               !files.mutual()          ? ""
               : side_port_client_certs ? ", client certificates required"
                                        : ", client certificates required "
                                          "but on the metrics port");
  return ports;
}

void Reload(const Reloadable& reloadable) {
  for (ApiKeyStore* keys : reloadable.keys) {
    if (keys == nullptr) continue;
    if (absl::Status s = keys->Reload(); s.ok()) {
      spdlog::info("reloaded {} API keys from {}", keys->size(), keys->path());
    } else {
      spdlog::error("keys not reloaded, the last ones stay: {}", s.ToString());
    }
  }
  for (HttpsCredentials* tls : reloadable.tls) {
    if (tls == nullptr) continue;
    if (absl::Status s = tls->Reload(); s.ok()) {
      spdlog::info(
          "reloaded the HTTP ports' TLS files for new connections; the gRPC "
          "port rereads them every {} s",
          reloadable.grpc_tls_refresh_seconds);
    } else {
      spdlog::error("TLS files not reloaded, the last ones stay: {}",
                    s.ToString());
    }
  }
}

}  // namespace seqboat
