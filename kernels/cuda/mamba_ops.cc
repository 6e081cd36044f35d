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
  LaunchMambaConv(dev, queue());
  CheckLaunch("MambaConv");
}

void CudaBackend::MambaScan(const MambaScanParams& p) {
  MambaScanParams dev = p;
  dev.segs = Stage(p.segs, p.nsegs);
  // A captured decode step keeps its kernel on replay: both kernels compute
  // any call, so the choice is only about speed. A folded dt_proj is the
  // decode kernel's own work; elsewhere (prefill, or shapes it does not
  // fold) it is the GEMM into p.dt_proj.dt, then the plain scan.
  const bool decode = AllDecodeRows(p.segs, p.nsegs);
  if (FoldsDtProj(p) && !(decode && MambaScanDecodeFoldsDtProj(p))) {
    Gemm(GemmOfDtProj(p));
    dev = ScanAfterDtProj(dev);
  }
  if (!launching() || dev.segs == nullptr) return;
  if (decode) {
    LaunchMambaScanDecode(dev, StorageOf(p.dt_proj.w), queue());
  } else {
    LaunchMambaScan(dev, queue());
  }
  CheckLaunch("MambaScan");
}

}  // namespace seqboat::cuda
