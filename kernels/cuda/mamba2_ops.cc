// Mamba-2's scan and gated norm: stage the segments, launch
// (mamba2_kernels.cu) with the op's own parameters.
#include "kernels/cuda/cuda_backend_impl.h"
#include "kernels/cuda/mamba2_kernels.h"

namespace seqboat::cuda {

void CudaBackend::Mamba2Scan(const Mamba2ScanParams& p) {
  Mamba2ScanParams dev = p;
  // Staged before the launching() check: a replay must re-read them.
  dev.segs = Stage(p.segs, p.nsegs);
  if (!launching() || dev.segs == nullptr) return;
  LaunchMamba2Scan(dev, stream_);
  CheckLaunch("Mamba2Scan");
}

void CudaBackend::GatedRmsNorm(const GatedRmsNormParams& p) {
  if (!launching()) return;
  LaunchGatedRmsNorm(p, stream_);
  CheckLaunch("GatedRmsNorm");
}

}  // namespace seqboat::cuda
