// Sampling on the CPU backend: its logits are host memory, so SampleRows is
// the host Sampler itself.
#include "engine/backend/sampler.h"
#include "kernels/cpu/cpu_backend_impl.h"

namespace seqboat::cpu {

absl::Status CpuBackend::SampleRows(const SampleRowsParams& p) {
  SampleRowsOnHost(p);
  return absl::OkStatus();
}

}  // namespace seqboat::cpu
