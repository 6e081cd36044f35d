// Per-tenant quotas, the same bounds for every tenant unless the keys file
// gives a tenant its own (WithOverrides): sequences in flight at once, a token
// bucket of requests per second, and one of tokens (prompt and generated) per
// second. The token bucket lets a request in while it holds at least one token;
// the prompt is taken at admission and the output as it is delivered, so a long
// request may take the bucket below zero, and the tenant's next one waits until
// it has refilled (a running request is never cut short; a request the engine
// refuses keeps its prompt's charge). A front end takes a request's share
// before submitting it (Admit) and gets RESOURCE_EXHAUSTED naming the bound and
// how long to wait when the tenant is over it; the sequences go back one by one
// as their final events pass through the sink Admit wraps. Thread-safe; a
// tenant's state starts at its first request.
#ifndef SEQBOAT_SERVER_TENANT_QUOTAS_H_
#define SEQBOAT_SERVER_TENANT_QUOTAS_H_

#include <cstdint>
#include <functional>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "engine/request.h"
#include "server/api_keys.h"

namespace seqboat {

// Every tenant's bounds, or one tenant's: 0 is no bound.
struct TenantLimits {
  int32_t max_sequences = 0;       // in flight per tenant; 0: unbounded
  double requests_per_second = 0;  // refill rate; 0: unbounded
  double request_burst = 0;        // bucket size; 0: max(1, the rate)
  double tokens_per_second = 0;    // prompt + generated; 0: unbounded
  double token_burst = 0;          // bucket size; 0: max(1, the rate)
};

// `limits` with what `overrides` (a tenant's line in the keys file) sets.
TenantLimits WithOverrides(TenantLimits limits,
                           const QuotaOverrides& overrides);

class TenantQuotas {
 public:
  // Each tenant's limits, asked at each admission (thread-safe).
  using LimitsOf = std::function<TenantLimits(const std::string& tenant)>;

  // Every tenant bounded by `limits`, or, given `limits_of`, each by what
  // it says (a keys file's quotas may change on reload; a tenant's
  // buckets keep their level and take new rates from its next request).
  explicit TenantQuotas(TenantLimits limits, LimitsOf limits_of = nullptr);

  bool enabled() const {
    return limits_of_ != nullptr || limits_.max_sequences > 0 ||
           limits_.requests_per_second > 0 || limits_.tokens_per_second > 0;
  }

  // Takes `request`'s share of its tenant's quotas at `now` and wraps its
  // sink so that each sequence's final event gives its slot of
  // max_sequences back; or RESOURCE_EXHAUSTED naming the bound, with
  // *retry_after the time until a retry can pass. A request the engine then
  // refuses gives its share back through Refused. The quotas must outlive
  // the engine's last event.
  absl::Status Admit(Request& request, absl::Time now,
                     absl::Duration* retry_after);
  void Refused(const std::string& tenant, int32_t n);

  // Sequences `tenant` has in flight.
  int32_t in_flight(const std::string& tenant) const;
  // Tokens in `tenant`'s token bucket at `now` (the burst before its first
  // request; below zero while in debt).
  double token_level(const std::string& tenant, absl::Time now) const;

 private:
  // A token bucket: `level` refills at `rate` up to `burst`.
  struct Bucket {
    double level = 0;
    absl::Time refilled;
    bool used = false;  // full until first used
    double Refill(double rate, double burst, absl::Time now);
  };
  struct Tenant {
    int32_t sequences = 0;
    Bucket requests;
    Bucket tokens;
  };
  TenantLimits LimitsFor(const std::string& tenant) const;
  absl::Status TakeBuckets(const Request& request, const TenantLimits& limits,
                           absl::Time now, Tenant& t,
                           absl::Duration* retry_after)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void Release(const std::string& tenant, int32_t sequences);
  void Charge(const std::string& tenant, size_t tokens);

  const TenantLimits limits_;
  const LimitsOf limits_of_;
  mutable absl::Mutex mu_;
  absl::flat_hash_map<std::string, Tenant> tenants_ ABSL_GUARDED_BY(mu_);
};

}  // namespace seqboat

#endif  // SEQBOAT_SERVER_TENANT_QUOTAS_H_
