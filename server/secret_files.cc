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

absl::StatusOr<std::unique_ptr<HttpsCredentials>> OpenTls(
    const TlsFiles& files) {
  if (!files.enabled()) return nullptr;
  ASSIGN_OR_RETURN(std::unique_ptr<HttpsCredentials> tls,
                   HttpsCredentials::Open(files));
  spdlog::info("TLS on every port from {}{}", files.cert_file,
               files.mutual() ? ", client certificates required" : "");
  return tls;
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
  if (reloadable.tls == nullptr) return;
  if (absl::Status s = reloadable.tls->Reload(); s.ok()) {
    spdlog::info(
        "reloaded the HTTP ports' TLS files for new connections; the gRPC "
        "port rereads them every {} s",
        reloadable.grpc_tls_refresh_seconds);
  } else {
    spdlog::error("TLS files not reloaded, the last ones stay: {}",
                  s.ToString());
  }
}

}  // namespace seqboat
