// Launcher parameters of CudaBackend::S4dScan from the op's arguments, once
// the segments are in device memory: the host half of s4d_ops.cc, apart so
// that the emulation tests (kernels/emu) launch the kernel with exactly the
// parameters the backend builds. No CUDA calls.
#ifndef SEQBOAT_KERNELS_S4D_PARAMS_H_
#define SEQBOAT_KERNELS_S4D_PARAMS_H_

#include <cstdint>

#include "engine/backend/backend.h"
#include "kernels/s4d_kernels.h"

namespace seqboat::cuda {

// dev_segs: the op's segments as staged for the device; the rest as
// Backend::S4dScan takes them.
S4dScanParams S4dScanParamsFor(const Segment* dev_segs, int nsegs,
                               const float* u, int ldu, const float* da,
                               const float* c, const float* d, float* state,
                               int64_t state_stride, int h, int m, int ch,
                               float scale, float* out);

}  // namespace seqboat::cuda

#endif  // SEQBOAT_KERNELS_S4D_PARAMS_H_
