#include "server/tenant_quotas.h"

#include <algorithm>
#include <memory>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace seqboat {

TenantQuotas::TenantQuotas(TenantLimits limits) : limits_(limits) {}

absl::Status TenantQuotas::Admit(Request& request, absl::Time now,
                                 absl::Duration* retry_after) {
  if (!enabled()) return absl::OkStatus();
  const int32_t n = std::max(request.n, 1);
  const double rate = limits_.requests_per_second;
  const double burst =
      limits_.request_burst > 0 ? limits_.request_burst : std::max(1.0, rate);
  {
    absl::MutexLock lock(&mu_);
    Tenant& t = tenants_[request.tenant];
    if (limits_.max_sequences > 0 && t.sequences + n > limits_.max_sequences) {
      // Nothing says when a sequence ends; a second is a fair first wait.
      *retry_after = absl::Seconds(1);
      return absl::ResourceExhaustedError(
          absl::StrCat("tenant '", request.tenant, "' has ", t.sequences,
                       " sequences running or queued; its limit is ",
                       limits_.max_sequences));
    }
    if (rate > 0) {
      t.tokens = t.tokens < 0
                     ? burst
                     : std::min(burst, t.tokens + rate * absl::ToDoubleSeconds(
                                                             now - t.refilled));
      t.refilled = now;
      if (t.tokens < 1) {
        *retry_after = absl::Seconds((1 - t.tokens) / rate);
        return absl::ResourceExhaustedError(
            absl::StrFormat("tenant '%s' is over its %g requests per second",
                            request.tenant, rate));
      }
      t.tokens -= 1;
    }
    t.sequences += n;
  }
  // One final event per sequence gives its share back, from whatever
  // thread delivers it; the sink outlives nothing it refers to but this.
  SharedSink inner = std::move(request.sink);
  request.sink = [this, tenant = request.tenant,
                  inner = std::move(inner)](GenerationEvent event) {
    const bool final_event =
        event.finish != FinishReason::kNone || !event.status.ok();
    inner(std::move(event));
    if (final_event) Release(tenant, 1);
  };
  return absl::OkStatus();
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
