// Mamba-1's recurrent ops: stage the segments, launch (mamba_kernels.cu).
#include "kernels/cuda_backend_impl.h"
#include "kernels/mamba_kernels.h"
#include "kernels/mamba_params.h"

namespace seqboat::cuda {

void CudaBackend::MambaConv(const Segment* segs, int nsegs, const float* x,
                            int ldx, float* state, int64_t state_stride,
                            const float* w, const float* bias, int e, int k,
                            float* out) {
  // Staged before the launching() check: a replay must re-read them.
  const Segment* dev_segs = Stage(segs, nsegs);
  if (!launching() || dev_segs == nullptr) return;
  LaunchMambaConv(MambaConvParamsFor(dev_segs, nsegs, x, ldx, state,
                                     state_stride, w, bias, e, k, out),
                  stream_);
  CheckLaunch("MambaConv");
}

void CudaBackend::MambaScan(const Segment* segs, int nsegs, const float* x,
                            const float* dt, const float* bc, int ldbc,
                            const float* z, int ldz, const float* a,
                            const float* d, const float* dt_bias, float* state,
                            int64_t state_stride, int e, int n_state,
                            float* out) {
  const Segment* dev_segs = Stage(segs, nsegs);
  if (!launching() || dev_segs == nullptr) return;
  LaunchMambaScan(
      MambaScanParamsFor(dev_segs, nsegs, x, dt, bc, ldbc, z, ldz, a, d,
                         dt_bias, state, state_stride, e, n_state, out),
      stream_);
  CheckLaunch("MambaScan");
}

}  // namespace seqboat::cuda
