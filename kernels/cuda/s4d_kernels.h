// Launcher of the S4D diagonal recurrence (s4d_kernels.cu): one thread per
// (segment, channel), tokens of a segment in order. Pointers are device
// memory; the launcher enqueues on `queue` and returns at once. nsegs == 0
// or h == 0 launches nothing.
//
// Segments of one call have distinct slots, except zero-length segments
// (decode padding), which may share a slot with a real one: those threads
// neither read nor write state.
#ifndef SEQBOAT_KERNELS_CUDA_S4D_KERNELS_H_
#define SEQBOAT_KERNELS_CUDA_S4D_KERNELS_H_

#include <stdint.h>

#include "engine/backend/s4d_params.h"
#include "kernels/cuda/launch_queue.h"

namespace seqboat::cuda {

// The channel's zeta in registers for m in {4, 8, 16, 32}, in global memory
// otherwise.
void LaunchS4dScan(const S4dScanParams& p, LaunchQueue queue);

}  // namespace seqboat::cuda

#endif  // SEQBOAT_KERNELS_CUDA_S4D_KERNELS_H_
