// Host-side parameter building of the SeqBoat ops, shared by the CUDA
// backend (seqboat_ops.cc) and the emulation tests (kernels/emu), so that the
// tests launch with the production parameters. Pure host code: no CUDA
// runtime call.
//
// Contract: the caller stages segs (and for the attention the ranges and
// SeqBoatRopeInvFreq(shape), null when that is empty) and passes the staged
// copies, which are not read here; the results go straight to the launchers.
#ifndef SEQBOAT_KERNELS_SEQBOAT_PARAMS_H_
#define SEQBOAT_KERNELS_SEQBOAT_PARAMS_H_

#include <cstdint>
#include <vector>

#include "engine/backend/backend.h"
#include "engine/backend/seqboat_shape.h"
#include "kernels/seqboat_kernels.h"

namespace seqboat::cuda {

SeqBoatEmaParams SeqBoatEmaLaunch(
    const Segment* staged_segs, int nsegs, const float* x, void* state,
    int64_t state_stride, const SeqBoatShape& shape, const float* in_coef,
    const float* decay, const float* out_coef, const float* skip, float* h);

// θ_i for i < z/2 with the CPU backend's own host pow, so both backends
// rotate by the same angles to the bit; empty without RoPE.
std::vector<double> SeqBoatRopeInvFreq(const SeqBoatShape& shape);

SeqBoatAttendParams SeqBoatAttendLaunch(
    const Segment* staged_segs, int nsegs,
    const SeqBoatActiveRange* staged_ranges, const double* staged_inv_freq,
    const int32_t* active_rows, const float* zrv, int ldzrv, void* state,
    int64_t state_stride, const SeqBoatShape& shape, const float* qk_gamma,
    const float* qk_beta, const float* rel_bias, float* out);

}  // namespace seqboat::cuda

#endif  // SEQBOAT_KERNELS_SEQBOAT_PARAMS_H_
