// Launchers of the SeqBoat kernels (seqboat_kernels.cu): MD-EMA, latent
// configurator, working-memory attention and the output mix (MODELS.md §2;
// contracts in engine/backend/backend.h). Pointers are device memory; each
// launcher enqueues on `queue` and returns at once. Empty work launches
// nothing, except the router, which always writes the active count.
#ifndef SEQBOAT_KERNELS_CUDA_SEQBOAT_KERNELS_CUDA_H_
#define SEQBOAT_KERNELS_CUDA_SEQBOAT_KERNELS_CUDA_H_

#include <stdint.h>

#include "engine/backend/seqboat_params.h"
#include "engine/backend/seqboat_shape.h"
#include "kernels/cuda/launch_queue.h"

namespace seqboat::cuda {

// One thread per (segment, channel), walking the segment's tokens in order.
void LaunchSeqBoatEma(const SeqBoatEmaParams& p, LaunchQueue queue);

// conf [n], compact [n], active [1 + n] (count, then the active rows in
// order; entries past the count are left untouched). One block.
void LaunchSeqBoatRoute(const SeqBoatRouteParams& p, LaunchQueue queue);

// One block per segment, its active tokens in order. Shared memory grows
// with w (about 8 bytes per FIFO entry); w up to ~28k fits an H100.
// inv_freq: op_math::SeqBoatRopeInvFreq(p.shape) staged on the device, RoPE
// only, else null.
void LaunchSeqBoatAttend(const SeqBoatAttendParams& p, const double* inv_freq,
                         LaunchQueue queue);
// Dynamic shared memory one LaunchSeqBoatAttend block needs for `shape`.
size_t SeqBoatAttendSharedBytes(const SeqBoatShape& shape);

// out [n, d] = SeqBoatOut(s, g, conf, y[compact] or 0); out may alias s.
void LaunchSeqBoatMix(const SeqBoatMixParams& p, LaunchQueue queue);

}  // namespace seqboat::cuda

#endif  // SEQBOAT_KERNELS_CUDA_SEQBOAT_KERNELS_CUDA_H_
