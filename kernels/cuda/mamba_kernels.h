// Launchers of the Mamba-1 kernels (mamba_kernels.cu): the causal depthwise
// conv and the selective scan, one thread per (segment, channel), tokens of a
// segment in order. Pointers are device memory; each launcher enqueues on
// `queue` and returns at once. nsegs == 0 or e == 0 launches nothing.
//
// Segments of one call have distinct slots, except zero-length segments
// (decode padding), which may share a slot with a real one: those threads
// neither read nor write state.
#ifndef SEQBOAT_KERNELS_CUDA_MAMBA_KERNELS_H_
#define SEQBOAT_KERNELS_CUDA_MAMBA_KERNELS_H_

#include <stdint.h>

#include "engine/backend/mamba_params.h"
#include "kernels/cuda/dense_kernels.h"
#include "kernels/cuda/launch_queue.h"

namespace seqboat::cuda {

// Window in registers for k in {2, 3, 4}, in global memory otherwise.
void LaunchMambaConv(const MambaConvParams& p, LaunchQueue queue);

// State and A rows in registers for n_state in {4, 8, 16, 32}, the state in
// global memory otherwise.
void LaunchMambaScan(const MambaScanParams& p, LaunchQueue queue);

// The scan for decode calls (AllDecodeRows): n_state lanes per channel, one
// state entry each, so one token's state traffic is coalesced and spread over
// e * n_state threads. Correct for any call (longer segments are looped);
// n_state outside {4, 8, 16, 32} takes LaunchMambaScan. The conv is already
// window shift + conv + SiLU in one kernel, and x_proj (a GEMV over all
// channels) lies between it and the scan, so it does not fuse with it.
//
// A folded dt_proj (p.dt_proj, stored as `dt_storage`) is computed here, each
// channel's dt from its weight row and the token's δ̃ (the lanes of a channel
// split dt_rank; rounding: mamba_kernels.cu DtFold), so dt_proj costs no
// launch and dt never goes through memory. Requires
// MambaScanDecodeFoldsDtProj(p); LaunchMambaScan takes no folded dt_proj.
void LaunchMambaScanDecode(const MambaScanParams& p, Storage dt_storage,
                           LaunchQueue queue);

// Whether LaunchMambaScanDecode computes p's folded dt_proj: n_state in
// {4, 8, 16, 32} and a block's weight rows within 48 KiB of shared memory
// (dt_rank up to 1536 at n_state 16). Otherwise the backend runs the GEMM
// into p.dt_proj.dt and the plain scan (ScanAfterDtProj).
bool MambaScanDecodeFoldsDtProj(const MambaScanParams& p);

}  // namespace seqboat::cuda

#endif  // SEQBOAT_KERNELS_CUDA_MAMBA_KERNELS_H_
