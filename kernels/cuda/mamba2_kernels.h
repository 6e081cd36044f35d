// Launchers of the Mamba-2 kernels (mamba2_kernels.cu): the multi-head scan,
// a warp per few (head, channel) state rows with the state entries spread
// over its lanes, tokens of a segment in order; the gated RMSNorm, a block
// per (row, group); and the fused decode step (conv, scan, gated norm).
// Pointers are device memory; each launcher enqueues on `queue` and returns at
// once. Nothing to do launches nothing.
//
// Segments of one call have distinct slots, except zero-length segments
// (decode padding), which may share a slot with a real one: those blocks
// neither read nor write state.
#ifndef SEQBOAT_KERNELS_CUDA_MAMBA2_KERNELS_H_
#define SEQBOAT_KERNELS_CUDA_MAMBA2_KERNELS_H_

#include <stdint.h>

#include "engine/backend/mamba2_params.h"
#include "kernels/cuda/launch_queue.h"

namespace seqboat::cuda {

// State rows in registers for n_state <= 256, in global memory otherwise.
void LaunchMamba2Scan(const Mamba2ScanParams& p, LaunchQueue queue);

void LaunchGatedRmsNorm(const GatedRmsNormParams& p, LaunchQueue queue);

// Mamba2Step in two kernels, for decode calls (AllDecodeRows; longer
// segments are computed too, token by token): per (rows of a head, segment)
// the conv of its x channels and of its group's B and C, the scan and the
// gate; then per (segment, norm group) the norm, and the B and C windows
// moved on. Equal bit for bit to LaunchMambaConv, LaunchMamba2Scan and
// LaunchGatedRmsNorm in turn (but conv.out is not written). Only for params
// that Mamba2StepFuses: 4 conv taps, n_state <= 256, the layout that
// Mamba2StepParams states.
bool Mamba2StepFuses(const Mamba2StepParams& p);
void LaunchMamba2Step(const Mamba2StepParams& p, LaunchQueue queue);

}  // namespace seqboat::cuda

#endif  // SEQBOAT_KERNELS_CUDA_MAMBA2_KERNELS_H_
