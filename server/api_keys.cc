#include "server/api_keys.h"

#include <openssl/crypto.h>
#include <openssl/sha.h>

#include <fstream>
#include <sstream>
#include <utility>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"

namespace seqboat {
namespace {

// Tenant names become metric labels and cache partitions: kept to a plain
// alphabet so that they never need escaping.
bool ValidTenant(absl::string_view name) {
  if (name.empty() || name.size() > 64) return false;
  for (char c : name) {
    if (!absl::ascii_isalnum(c) && c != '_' && c != '-' && c != '.') {
      return false;
    }
  }
  return true;
}

bool PrintableWithoutSpace(absl::string_view key) {
  for (char c : key) {
    if (c <= ' ' || c > '~') return false;
  }
  return true;
}

}  // namespace

bool ConstantTimeEqual(absl::string_view a, absl::string_view b) {
  if (a.size() != b.size()) return false;
  return CRYPTO_memcmp(a.data(), b.data(), a.size()) == 0;
}

absl::string_view BearerToken(absl::string_view authorization) {
  authorization = absl::StripAsciiWhitespace(authorization);
  constexpr absl::string_view kScheme = "bearer ";
  if (authorization.size() <= kScheme.size() ||
      !absl::EqualsIgnoreCase(authorization.substr(0, kScheme.size()),
                              kScheme)) {
    return "";
  }
  return absl::StripLeadingAsciiWhitespace(
      authorization.substr(kScheme.size()));
}

ApiKeys::Digest ApiKeys::Hash(absl::string_view key) {
  Digest digest;
  SHA256(reinterpret_cast<const unsigned char*>(key.data()), key.size(),
         digest.data());
  return digest;
}

absl::StatusOr<ApiKeys> ApiKeys::Parse(absl::string_view text,
                                       absl::string_view source) {
  ApiKeys keys;
  // Digest -> line, to name a repeated key by its lines (never its text).
  absl::flat_hash_map<std::string, int> seen;
  int line_no = 0;
  for (absl::string_view line : absl::StrSplit(text, '\n')) {
    ++line_no;
    line = absl::StripAsciiWhitespace(line);
    if (line.empty() || line[0] == '#') continue;
    const std::vector<absl::string_view> fields =
        absl::StrSplit(line, absl::ByAnyChar(" \t"), absl::SkipEmpty());
    const std::string where = absl::StrCat(source, " line ", line_no, ": ");
    if (fields.size() > 2) {
      return absl::InvalidArgumentError(
          absl::StrCat(where, "expected KEY or KEY TENANT, found ",
                       fields.size(), " fields"));
    }
    const absl::string_view key = fields[0];
    if (key.size() < kMinApiKeyBytes || key.size() > kMaxApiKeyBytes) {
      return absl::InvalidArgumentError(
          absl::StrCat(where, "the key is ", key.size(), " bytes; keys are ",
                       kMinApiKeyBytes, " to ", kMaxApiKeyBytes, " bytes"));
    }
    if (!PrintableWithoutSpace(key)) {
      return absl::InvalidArgumentError(absl::StrCat(
          where, "the key holds a byte that is not printable ASCII"));
    }
    const absl::string_view tenant =
        fields.size() == 2 ? fields[1] : absl::string_view(kDefaultTenant);
    if (!ValidTenant(tenant)) {
      return absl::InvalidArgumentError(
          absl::StrCat(where, "tenant '", tenant,
                       "' is not 1 to 64 of A-Z, a-z, 0-9, '_', '-', '.'"));
    }
    Entry entry{Hash(key), std::string(tenant)};
    const std::string digest(entry.digest.begin(), entry.digest.end());
    if (auto [it, added] = seen.emplace(digest, line_no); !added) {
      return absl::InvalidArgumentError(
          absl::StrCat(where, "the key of line ", it->second, " again"));
    }
    keys.entries_.push_back(std::move(entry));
  }
  return keys;
}

std::optional<std::string> ApiKeys::TenantOf(absl::string_view key) const {
  const Digest digest = Hash(key);
  const absl::string_view presented(
      reinterpret_cast<const char*>(digest.data()), digest.size());
  // Every digest is compared, whole: no early exit on a match or a mismatch.
  uint64_t found = 0;  // index + 1 of the match, 0 for none
  for (size_t i = 0; i < entries_.size(); ++i) {
    const absl::string_view stored(
        reinterpret_cast<const char*>(entries_[i].digest.data()),
        entries_[i].digest.size());
    const uint64_t mask = uint64_t{0} - static_cast<uint64_t>(ConstantTimeEqual(
                                            presented, stored));
    found = (mask & (i + 1)) | (~mask & found);
  }
  if (found == 0) return std::nullopt;
  return entries_[found - 1].tenant;
}

absl::StatusOr<std::unique_ptr<ApiKeyStore>> ApiKeyStore::Open(
    std::string path) {
  std::unique_ptr<ApiKeyStore> store(new ApiKeyStore(std::move(path)));
  if (absl::Status s = store->Reload(); !s.ok()) return s;
  if (store->size() == 0) {
    return absl::InvalidArgumentError(
        absl::StrCat(store->path_,
                     " holds no keys: every request would be "
                     "refused"));
  }
  return store;
}

absl::Status ApiKeyStore::Reload() {
  std::ifstream in(path_, std::ios::binary);
  if (!in) {
    return absl::NotFoundError(absl::StrCat("cannot read ", path_));
  }
  std::ostringstream text;
  text << in.rdbuf();
  absl::StatusOr<ApiKeys> keys = ApiKeys::Parse(text.str(), path_);
  if (!keys.ok()) return keys.status();
  auto loaded = std::make_shared<const ApiKeys>(*std::move(keys));
  absl::MutexLock lock(&mu_);
  keys_ = std::move(loaded);
  return absl::OkStatus();
}

std::optional<std::string> ApiKeyStore::Authorize(
    absl::string_view authorization) const {
  std::shared_ptr<const ApiKeys> keys;
  {
    absl::MutexLock lock(&mu_);
    keys = keys_;
  }
  const absl::string_view key = BearerToken(authorization);
  // An oversized token goes no further than the empty one: hashing
  // megabytes per request would make refusals cheap to abuse. Lengths are
  // not secret.
  return keys->TenantOf(key.size() <= kMaxApiKeyBytes ? key : "");
}

size_t ApiKeyStore::size() const {
  absl::MutexLock lock(&mu_);
  return keys_->size();
}

}  // namespace seqboat
