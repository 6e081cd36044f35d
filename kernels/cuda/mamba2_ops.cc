// Mamba-2's scan and gated norm: stage the segments, launch
// (mamba2_kernels.cu) with the op's own parameters; Mamba2Step fused for
// decode calls, op by op otherwise.
#include "kernels/cuda/cuda_backend_impl.h"
#include "kernels/cuda/mamba2_kernels.h"

namespace seqboat::cuda {

void CudaBackend::Mamba2Scan(const Mamba2ScanParams& p) {
  Mamba2ScanParams dev = p;
  // Staged before the launching() check: a replay must re-read them.
  dev.segs = Stage(p.segs, p.nsegs);
  if (!launching() || dev.segs == nullptr) return;
  LaunchMamba2Scan(dev, queue());
  CheckLaunch("Mamba2Scan");
}

void CudaBackend::GatedRmsNorm(const GatedRmsNormParams& p) {
  if (!launching()) return;
  LaunchGatedRmsNorm(p, queue());
  CheckLaunch("GatedRmsNorm");
}

void CudaBackend::Mamba2Step(const Mamba2StepParams& p) {
  // A prefill chunk has enough rows to fill the device op by op. The choice
  // holds on replay: captured steps are decode steps.
  if (!AllDecodeRows(p.scan.segs, p.scan.nsegs) || !Mamba2StepFuses(p)) {
    MambaConv(p.conv);
    Mamba2Scan(p.scan);
    GatedRmsNorm(p.norm);
    return;
  }
  Mamba2StepParams dev = p;
  dev.scan.segs = Stage(p.scan.segs, p.scan.nsegs);
  dev.conv.segs = dev.scan.segs;
  if (!launching() || dev.scan.segs == nullptr) return;
  LaunchMamba2Step(dev, queue());
  CheckLaunch("Mamba2Step");
}

}  // namespace seqboat::cuda
