// Launcher of the Gated DeltaNet kernel (gdn_kernels.cu): a block per (value
// head, segment), a thread per column of the head's [k_dim, v_dim] state,
// tokens of a segment in order. Pointers are device memory; the launcher
// enqueues on `queue` and returns at once. Nothing to do launches nothing.
//
// Segments of one call have distinct slots, except zero-length segments
// (decode padding), which may share a slot with a real one: those neither
// read nor write state.
#ifndef SEQBOAT_KERNELS_CUDA_GDN_KERNELS_H_
#define SEQBOAT_KERNELS_CUDA_GDN_KERNELS_H_

#include "engine/backend/gdn_params.h"
#include "kernels/cuda/launch_queue.h"

namespace seqboat::cuda {

// The widest value head a block covers (a thread per column).
inline constexpr int kGdnMaxVDim = 1024;

// v_dim <= kGdnMaxVDim (checked when the layer loads).
void LaunchGdnScan(const GdnScanParams& p, LaunchQueue queue);

}  // namespace seqboat::cuda

#endif  // SEQBOAT_KERNELS_CUDA_GDN_KERNELS_H_
