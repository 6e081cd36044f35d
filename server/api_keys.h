// API keys: the keys file's parse and the check both front ends make of a
// presented key. A key is kept only as its SHA-256 digest; a presented key
// is hashed and compared with every stored digest, each compare over all its
// bytes, so the time taken depends on the number of keys alone, never on how
// much of a key was right (no lookup is keyed by the secret). Errors name the
// file and line, never a key's text; keys are never logged.
//
// The file: one key per line, or `KEY TENANT` (whitespace between), or
// `KEY TENANT NAME=VALUE...` giving the tenant quotas of its own (see
// QuotaOverrides); blank lines and lines starting with `#` are skipped. A
// key without a tenant belongs to the tenant "default". The tenant names
// what the key may see of the prefix cache and labels the per-tenant
// metrics.
#ifndef SEQBOAT_SERVER_API_KEYS_H_
#define SEQBOAT_SERVER_API_KEYS_H_

#include <array>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"

namespace seqboat {

inline constexpr char kDefaultTenant[] = "default";
inline constexpr size_t kMinApiKeyBytes = 16;
inline constexpr size_t kMaxApiKeyBytes = 4096;

// Whether `a` and `b` hold the same bytes, in a time that depends only on
// their lengths (different lengths are unequal at once: lengths are public).
bool ConstantTimeEqual(absl::string_view a, absl::string_view b);

// The key of an `Authorization: Bearer KEY` value ("" if it is not one).
absl::string_view BearerToken(absl::string_view authorization);

// A tenant's own quotas from the keys file; what is left out takes the
// server's flags (--tenant_max_sequences and the others of those names).
// Several lines of one tenant may give them only if they give the same.
struct QuotaOverrides {
  std::optional<int32_t> max_sequences;
  std::optional<double> requests_per_second;
  std::optional<double> request_burst;
  std::optional<double> tokens_per_second;
  std::optional<double> token_burst;
  bool operator==(const QuotaOverrides& o) const;
  bool empty() const { return *this == QuotaOverrides{}; }
};

class ApiKeys {
 public:
  // Parses a keys file's text; `source` names it in errors. An empty set
  // (no key lines) is valid here: it refuses every key.
  static absl::StatusOr<ApiKeys> Parse(absl::string_view text,
                                       absl::string_view source);

  // The tenant of `key`, or nullopt when it is none of the keys.
  std::optional<std::string> TenantOf(absl::string_view key) const;
  // The quotas the file gives `tenant` (empty when none).
  QuotaOverrides QuotasOf(const std::string& tenant) const;
  size_t size() const { return entries_.size(); }

 private:
  using Digest = std::array<uint8_t, 32>;
  struct Entry {
    Digest digest;
    std::string tenant;
  };
  static Digest Hash(absl::string_view key);

  std::vector<Entry> entries_;
  // Tenant -> its quotas and the line that gave them first.
  absl::flat_hash_map<std::string, std::pair<QuotaOverrides, int>> quotas_;
};

// The keys of a file, reloaded on demand (SIGHUP): a key removed from the
// file is refused from the reload on. Thread-safe.
class ApiKeyStore {
 public:
  // Reads `path`; a file that cannot be read, a malformed line or a file of
  // no keys is an error naming the file (and line).
  static absl::StatusOr<std::unique_ptr<ApiKeyStore>> Open(std::string path);

  // Reads the file again. On an error the keys loaded before stay in force
  // (the error says why); a file of no keys refuses every key.
  absl::Status Reload();

  // The tenant of the key in an Authorization value ("Bearer KEY"), or
  // nullopt: missing, not Bearer, or not a key.
  std::optional<std::string> Authorize(absl::string_view authorization) const;
  // The quotas the file (as last loaded) gives `tenant`.
  QuotaOverrides QuotasOf(const std::string& tenant) const;
  size_t size() const;
  const std::string& path() const { return path_; }

 private:
  explicit ApiKeyStore(std::string path) : path_(std::move(path)) {}

  const std::string path_;
  mutable absl::Mutex mu_;
  std::shared_ptr<const ApiKeys> keys_ ABSL_GUARDED_BY(mu_);
};

}  // namespace seqboat

#endif  // SEQBOAT_SERVER_API_KEYS_H_
