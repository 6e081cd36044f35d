#include "server/tenant_quotas.h"

#include <algorithm>
#include <memory>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace seqboat {
namespace {

// A bucket refilled for exactly the wait a refusal named holds one token,
// whatever the rounding of that wait.
constexpr double kOneToken = 1 - 1e-9;

double RequestBurst(const TenantLimits& limits) {
  return limits.request_burst > 0 ? limits.request_burst
                                  : std::max(1.0, limits.requests_per_second);
}

double TokenBurst(const TenantLimits& limits) {
  return limits.token_burst > 0 ? limits.token_burst
                                : std::max(1.0, limits.tokens_per_second);
}

}  // namespace

TenantLimits WithOverrides(TenantLimits limits, const QuotaOverrides& o) {
  limits.max_sequences = o.max_sequences.value_or(limits.max_sequences);
  limits.requests_per_second =
      o.requests_per_second.value_or(limits.requests_per_second);
  limits.request_burst = o.request_burst.value_or(limits.request_burst);
  limits.tokens_per_second =
      o.tokens_per_second.value_or(limits.tokens_per_second);
  limits.token_burst = o.token_burst.value_or(limits.token_burst);
  return limits;
}

TenantQuotas::TenantQuotas(TenantLimits limits, LimitsOf limits_of)
    : limits_(limits), limits_of_(std::move(limits_of)) {}

TenantLimits TenantQuotas::LimitsFor(const std::string& tenant) const {
  return limits_of_ ? limits_of_(tenant) : limits_;
}

double TenantQuotas::Bucket::Refill(double rate, double burst, absl::Time now) {
  level = used ? std::min(burst,
                          level + rate * absl::ToDoubleSeconds(now - refilled))
               : burst;
  used = true;
  refilled = now;
  return level;
}

// Both buckets are checked before either is taken from, so a refusal costs
// the tenant nothing.
absl::Status TenantQuotas::TakeBuckets(const Request& request,
                                       const TenantLimits& limits,
                                       absl::Time now, Tenant& t,
                                       absl::Duration* retry_after) {
  const double request_rate = limits.requests_per_second;
  if (request_rate > 0 &&
      t.requests.Refill(request_rate, RequestBurst(limits), now) < kOneToken) {
    *retry_after = absl::Seconds((1 - t.requests.level) / request_rate);
    return absl::ResourceExhaustedError(
        absl::StrFormat("tenant '%s' is over its %g requests per second",
                        request.tenant, request_rate));
  }
  const double token_rate = limits.tokens_per_second;
  if (token_rate > 0 &&
      t.tokens.Refill(token_rate, TokenBurst(limits), now) < kOneToken) {
    *retry_after = absl::Seconds((1 - t.tokens.level) / token_rate);
    return absl::ResourceExhaustedError(
        absl::StrFormat("tenant '%s' is over its %g tokens per second",
                        request.tenant, token_rate));
  }
  if (request_rate > 0) t.requests.level -= 1;
  if (token_rate > 0) {
    t.tokens.level -= static_cast<double>(request.prompt.size());
  }
  return absl::OkStatus();
}

absl::Status TenantQuotas::Admit(Request& request, absl::Time now,
                                 absl::Duration* retry_after) {
  if (!enabled()) return absl::OkStatus();
  const int32_t n = std::max(request.n, 1);
  // Read before taking mu_: limits_of_ may take a lock of its own.
  const TenantLimits limits = LimitsFor(request.tenant);
  {
    absl::MutexLock lock(&mu_);
    Tenant& t = tenants_[request.tenant];
    if (limits.max_sequences > 0 && t.sequences + n > limits.max_sequences) {
      // Nothing says when a sequence ends; a second is a fair first wait.
      *retry_after = absl::Seconds(1);
      return absl::ResourceExhaustedError(absl::StrCat(
          "tenant '", request.tenant, "' has ", t.sequences,
          " sequences running or queued; its limit is ", limits.max_sequences));
    }
    if (absl::Status s = TakeBuckets(request, limits, now, t, retry_after);
        !s.ok()) {
      return s;
    }
    t.sequences += n;
  }
  // One final event per sequence gives its share back, and each event's
  // tokens are taken from the token bucket, from whatever thread delivers
  // it; the sink outlives nothing it refers to but this.
  SharedSink inner = std::move(request.sink);
  request.sink = [this, tenant = request.tenant,
                  charge = limits.tokens_per_second > 0,
                  inner = std::move(inner)](GenerationEvent event) {
    const bool final_event =
        event.finish != FinishReason::kNone || !event.status.ok();
    // Charged before the client can see the tokens, so its next request
    // finds them taken.
    if (charge && !event.token_ids.empty()) {
      Charge(tenant, event.token_ids.size());
    }
    inner(std::move(event));
    if (final_event) Release(tenant, 1);
  };
  return absl::OkStatus();
}

void TenantQuotas::Charge(const std::string& tenant, size_t tokens) {
  absl::MutexLock lock(&mu_);
  auto it = tenants_.find(tenant);
  if (it != tenants_.end()) {
    it->second.tokens.level -= static_cast<double>(tokens);
  }
}

double TenantQuotas::token_level(const std::string& tenant,
                                 absl::Time now) const {
  const TenantLimits limits = LimitsFor(tenant);
  absl::MutexLock lock(&mu_);
  auto it = tenants_.find(tenant);
  if (it == tenants_.end() || !it->second.tokens.used) {
    return TokenBurst(limits);
  }
  Bucket bucket = it->second.tokens;
  return bucket.Refill(limits.tokens_per_second, TokenBurst(limits), now);
}

void TenantQuotas::Refused(const std::string& tenant, int32_t n) {
  if (enabled()) Release(tenant, std::max(n, 1));
}

void TenantQuotas::Release(const std::string& tenant, int32_t sequences) {
  absl::MutexLock lock(&mu_);
  auto it = tenants_.find(tenant);
  if (it != tenants_.end()) {
    it->second.sequences = std::max(0, it->second.sequences - sequences);
  }
}

int32_t TenantQuotas::in_flight(const std::string& tenant) const {
  absl::MutexLock lock(&mu_);
  auto it = tenants_.find(tenant);
  return it == tenants_.end() ? 0 : it->second.sequences;
}

}  // namespace seqboat
