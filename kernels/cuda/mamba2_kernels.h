// Launchers of the Mamba-2 kernels (mamba2_kernels.cu): the multi-head scan,
// a warp per few (head, channel) state rows with the state entries spread
// over its lanes, tokens of a segment in order; and the gated RMSNorm, a
// block per (row, group). Pointers are device memory; each launcher enqueues
// on `stream` and returns at once. Nothing to do launches nothing.
//
// Segments of one call have distinct slots, except zero-length segments
// (decode padding), which may share a slot with a real one: those blocks
// neither read nor write state.
#ifndef SEQBOAT_KERNELS_CUDA_MAMBA2_KERNELS_H_
#define SEQBOAT_KERNELS_CUDA_MAMBA2_KERNELS_H_

#include <cuda_runtime_api.h>
#include <stdint.h>

#include "engine/backend/mamba2_params.h"

namespace seqboat::cuda {

// State rows in registers for n_state <= 256, in global memory otherwise.
void LaunchMamba2Scan(const Mamba2ScanParams& p, cudaStream_t stream);

void LaunchGatedRmsNorm(const GatedRmsNormParams& p, cudaStream_t stream);

}  // namespace seqboat::cuda

#endif  // SEQBOAT_KERNELS_CUDA_MAMBA2_KERNELS_H_
