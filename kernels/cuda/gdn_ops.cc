// Gated DeltaNet's scan: stage the segments, launch (gdn_kernels.cu).
#include "kernels/cuda/cuda_backend_impl.h"
#include "kernels/cuda/gdn_kernels.h"

namespace seqboat::cuda {

void CudaBackend::GdnScan(const GdnScanParams& p) {
  GdnScanParams dev = p;
  // Staged before the launching() check: a replay must re-read them.
  dev.segs = Stage(p.segs, p.nsegs);
  if (!launching() || dev.segs == nullptr) return;
  LaunchGdnScan(dev, queue());
  CheckLaunch("GdnScan");
}

}  // namespace seqboat::cuda
