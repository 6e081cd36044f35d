#include "server/api_keys.h"

#include <openssl/crypto.h>
#include <openssl/sha.h>

#include <cmath>
#include <fstream>
#include <sstream>
#include <utility>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
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

constexpr char kQuotaNames[] =
    "max_sequences, requests_per_second, request_burst, tokens_per_second, "
    "token_burst";

// One NAME=VALUE field of a key's line into `q`.
absl::Status ParseQuota(absl::string_view field, size_t index,
                        const std::string& where, QuotaOverrides* q) {
  const std::pair<absl::string_view, absl::string_view> nv =
      absl::StrSplit(field, absl::MaxSplits('=', 1));
  auto refuse = [&](absl::string_view why) {
    return absl::InvalidArgumentError(absl::StrCat(where, why));
  };
  if (!absl::StrContains(field, '=')) {
    // Not echoed: a key written with a space in it would land here.
    return refuse(absl::StrCat(
        "field ", index + 1, " is not a quota NAME=VALUE (", kQuotaNames, ")"));
  }
  if (nv.first == "max_sequences") {
    int32_t n;
    if (q->max_sequences.has_value()) return refuse("max_sequences twice");
    if (!absl::SimpleAtoi(nv.second, &n) || n < 0) {
      return refuse(absl::StrCat("max_sequences must be an integer >= 0, got '",
                                 nv.second, "'"));
    }
    q->max_sequences = n;
    return absl::OkStatus();
  }
  std::optional<double>* target =
      nv.first == "requests_per_second" ? &q->requests_per_second
      : nv.first == "request_burst"     ? &q->request_burst
      : nv.first == "tokens_per_second" ? &q->tokens_per_second
      : nv.first == "token_burst"       ? &q->token_burst
                                        : nullptr;
  if (target == nullptr) {
    return refuse(absl::StrCat("field ", index + 1, " names no quota (",
                               kQuotaNames, ")"));
  }
  if (target->has_value()) return refuse(absl::StrCat(nv.first, " twice"));
  double value;
  if (!absl::SimpleAtod(nv.second, &value) || !std::isfinite(value) ||
      value < 0) {
    return refuse(absl::StrCat(nv.first, " must be a number >= 0, got '",
                               nv.second, "'"));
  }
  *target = value;
  return absl::OkStatus();
}

bool PrintableWithoutSpace(absl::string_view key) {
  for (char c : key) {
    if (c <= ' ' || c > '~') return false;
  }
  return true;
}

}  // namespace

bool QuotaOverrides::operator==(const QuotaOverrides& o) const {
  return max_sequences == o.max_sequences &&
         requests_per_second == o.requests_per_second &&
         request_burst == o.request_burst &&
         tokens_per_second == o.tokens_per_second &&
         token_burst == o.token_burst;
}

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
        fields.size() >= 2 ? fields[1] : absl::string_view(kDefaultTenant);
    if (!ValidTenant(tenant)) {
      return absl::InvalidArgumentError(
          absl::StrCat(where, "tenant '", tenant,
                       "' is not 1 to 64 of A-Z, a-z, 0-9, '_', '-', '.'"));
    }
    QuotaOverrides quotas;
    for (size_t i = 2; i < fields.size(); ++i) {
      if (absl::Status s = ParseQuota(fields[i], i, where, &quotas); !s.ok()) {
        return s;
      }
    }
    if (!quotas.empty()) {
      auto [it, added] =
          keys.quotas_.emplace(std::string(tenant), std::pair(quotas, line_no));
      if (!added && !(it->second.first == quotas)) {
        return absl::InvalidArgumentError(absl::StrCat(
            where, "tenant '", tenant, "' was given other quotas on line ",
            it->second.second));
      }
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

QuotaOverrides ApiKeys::QuotasOf(const std::string& tenant) const {
  auto it = quotas_.find(tenant);
  return it == quotas_.end() ? QuotaOverrides{} : it->second.first;
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

QuotaOverrides ApiKeyStore::QuotasOf(const std::string& tenant) const {
  absl::MutexLock lock(&mu_);
  return keys_->QuotasOf(tenant);
}

size_t ApiKeyStore::size() const {
  absl::MutexLock lock(&mu_);
  return keys_->size();
}

}  // namespace seqboat
