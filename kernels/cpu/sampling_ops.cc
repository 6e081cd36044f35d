// Sampling on the CPU backend: its logits are host memory, so SampleRows is
// the host Sampler itself.
#include "engine/backend/sampler.h"
#include "kernels/cpu/cpu_backend_impl.h"

namespace seqboat::cpu {

absl::Status CpuBackend::SampleRows(const float* logits, int m, int vocab,
                                    float logit_scale, const SampleRow* rows,
                                    const int32_t* seen_ids, int32_t* tokens) {
  SampleRowsOnHost(logits, m, vocab, logit_scale, rows, seen_ids, tokens);
  return absl::OkStatus();
}

}  // namespace seqboat::cpu
