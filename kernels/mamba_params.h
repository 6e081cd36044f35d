// Launcher parameters of CudaBackend::MambaConv / MambaScan from the op's
// arguments, once the segments are in device memory: the host half of
// mamba_ops.cc, apart so that the emulation tests (kernels/emu) launch the
// kernels with exactly the parameters the backend builds. No CUDA calls.
#ifndef SEQBOAT_KERNELS_MAMBA_PARAMS_H_
#define SEQBOAT_KERNELS_MAMBA_PARAMS_H_

#include <cstdint>

#include "engine/backend/backend.h"
#include "kernels/mamba_kernels.h"

namespace seqboat::cuda {

// dev_segs: the op's segments as staged for the device; the rest as
// Backend::MambaConv takes them.
MambaConvParams MambaConvParamsFor(const Segment* dev_segs, int nsegs,
                                   const float* x, int ldx, float* state,
                                   int64_t state_stride, const float* w,
                                   const float* bias, int e, int k, float* out);

// dev_segs: as above; the rest as Backend::MambaScan takes them.
MambaScanParams MambaScanParamsFor(const Segment* dev_segs, int nsegs,
                                   const float* x, const float* dt,
                                   const float* bc, int ldbc, const float* z,
                                   int ldz, const float* a, const float* d,
                                   const float* dt_bias, float* state,
                                   int64_t state_stride, int e, int n_state,
                                   float* out);

}  // namespace seqboat::cuda

#endif  // SEQBOAT_KERNELS_MAMBA_PARAMS_H_
