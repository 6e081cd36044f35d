// S4D's recurrence: stage the segments, launch (s4d_kernels.cu) with the op's
// own parameters.
#include "kernels/cuda/cuda_backend_impl.h"
#include "kernels/cuda/s4d_kernels.h"

namespace seqboat::cuda {

void CudaBackend::S4dScan(const S4dScanParams& p) {
  S4dScanParams dev = p;
  // Staged before the launching() check: a replay must re-read them.
  dev.segs = Stage(p.segs, p.nsegs);
  if (!launching() || dev.segs == nullptr) return;
  LaunchS4dScan(dev, queue());
  CheckLaunch("S4dScan");
}

}  // namespace seqboat::cuda
