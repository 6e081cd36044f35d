// The host half of CudaBackend::SampleRows (sampling_ops.cc): the rows'
// checks, the scratch it sizes (tokens, then the kernels' workspace) and
// the launcher parameters built on it, apart so that the emulation tests
// (kernels/emu) launch the sampling kernels with exactly what the backend
// builds. Staging the rows and ids for the device stays in the op. No CUDA
// calls here, but SampleRowsWorkspaceBytes and SampleRowMayRank come from
// whichever build of sampling_kernels.cu the binary links.
#ifndef SEQBOAT_KERNELS_CUDA_SAMPLING_PARAMS_H_
#define SEQBOAT_KERNELS_CUDA_SAMPLING_PARAMS_H_

#include <cstddef>
#include <cstdint>

#include "absl/status/statusor.h"
#include "engine/backend/sample_row.h"
#include "kernels/cuda/sampling_kernels.h"

namespace seqboat::cuda {

// What the op learns from its m rows before staging them.
struct SampleRowsPlan {
  size_t seen = 0;          // ids of seen_ids that some row reaches
  bool any_ranked = false;  // some row may need its tokens sorted
  size_t mask_words = 0;    // words of SampleRowsParams::masks some row reads
};

// Fails on a row with a negative seen, counted or suppressed range, or a
// mask the call's masks do not hold (fewer than TokenBitmaskWords(vocab)
// words a row, or none).
absl::StatusOr<SampleRowsPlan> PlanSampleRows(const SampleRow* rows, int m);
absl::StatusOr<SampleRowsPlan> PlanSampleRows(const SampleRowsParams& op);

// Bytes of scratch a call of m rows of `vocab` logits needs: the tokens,
// then the workspace. Fails when the kernels cannot take that shape.
absl::StatusOr<size_t> SampleScratchBytes(int m, int vocab);

// What to allocate when `need` (SampleScratchBytes) outgrows the scratch:
// room for the next power of two of rows, so that a batch growing one
// sequence at a time reallocates only a few times.
size_t SampleScratchGrowth(int m, int vocab, size_t need);

// The launch of the op's m rows on `scratch` (scratch_bytes of them, at
// least SampleScratchBytes): the tokens at its start, the workspace after
// them. `op`'s rows and seen_ids are the device copies; its tokens are not
// read (the launch writes them to the scratch).
SampleLaunchParams SampleLaunchFor(const SampleRowsParams& op,
                                   const SampleRowsPlan& plan, void* scratch,
                                   size_t scratch_bytes);

}  // namespace seqboat::cuda

#endif  // SEQBOAT_KERNELS_CUDA_SAMPLING_PARAMS_H_
