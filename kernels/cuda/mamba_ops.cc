// Mamba-1's recurrent ops: stage the segments, launch (mamba_kernels.cu)
// with the op's own parameters.
#include "kernels/cuda/cuda_backend_impl.h"
#include "kernels/cuda/mamba_kernels.h"

namespace seqboat::cuda {

void CudaBackend::MambaConv(const MambaConvParams& p) {
  MambaConvParams dev = p;
  // Staged before the launching() check: a replay must re-read them.
  dev.segs = Stage(p.segs, p.nsegs);
  if (!launching() || dev.segs == nullptr) return;
  LaunchMambaConv(dev, stream_);
  CheckLaunch("MambaConv");
}

void CudaBackend::MambaScan(const MambaScanParams& p) {
  MambaScanParams dev = p;
  dev.segs = Stage(p.segs, p.nsegs);
  if (!launching() || dev.segs == nullptr) return;
  // A captured decode step keeps its kernel on replay: both kernels compute
  // any call, so the choice is only about speed.
  if (AllDecodeRows(p.segs, p.nsegs)) {
    LaunchMambaScanDecode(dev, stream_);
  } else {
    LaunchMambaScan(dev, stream_);
  }
  CheckLaunch("MambaScan");
}

}  // namespace seqboat::cuda
