// Sampling on the CPU backend: its logits are host memory, so SampleRows is
// the host Sampler itself.
#include "base/status_macros.h"
#include "engine/backend/penalty_table.h"
#include "engine/backend/sampler.h"
#include "kernels/cpu/cpu_backend_impl.h"

namespace seqboat::cpu {

absl::Status CpuBackend::SampleRows(const SampleRowsParams& p) {
  if (p.table.size == 0) {
    SampleRowsOnHost(p);
    return absl::OkStatus();
  }
  RETURN_IF_ERROR(ApplyPenaltyTableUpdate(p, &penalty_table_));
  SampleRowsParams read = p;
  read.seen_ids = penalty_table_.data();
  SampleRowsOnHost(read);
  return absl::OkStatus();
}

}  // namespace seqboat::cpu
