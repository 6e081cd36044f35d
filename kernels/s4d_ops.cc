// S4D's diagonal recurrence: stage the segments, launch (s4d_kernels.cu).
#include "kernels/cuda_backend_impl.h"
#include "kernels/s4d_kernels.h"
#include "kernels/s4d_params.h"

namespace seqboat::cuda {

void CudaBackend::S4dScan(const Segment* segs, int nsegs, const float* u,
                          int ldu, const float* da, const float* c,
                          const float* d, float* state, int64_t state_stride,
                          int h, int m, int ch, float scale, float* out) {
  // Staged before the launching() check: a replay must re-read them.
  const Segment* dev_segs = Stage(segs, nsegs);
  if (!launching() || dev_segs == nullptr) return;
  LaunchS4dScan(S4dScanParamsFor(dev_segs, nsegs, u, ldu, da, c, d, state,
                                 state_stride, h, m, ch, scale, out),
                stream_);
  CheckLaunch("S4dScan");
}

}  // namespace seqboat::cuda
