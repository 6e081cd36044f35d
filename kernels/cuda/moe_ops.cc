// The device-grouped experts: every descriptor is already device memory
// (the layer's scratch and handles), so nothing is staged (moe_kernels.cu).
#include "kernels/cuda/cuda_backend_impl.h"
#include "kernels/cuda/moe_kernels.h"

namespace seqboat::cuda {

void CudaBackend::MoeGroup(const MoeGroupParams& p) {
  if (!launching()) return;
  LaunchMoeGroup(p, queue());
  CheckLaunch("MoeGroup");
}

void CudaBackend::MoeGemm(const MoeGemmParams& p) {
  if (!launching()) return;
  LaunchMoeGemm(p, StorageOf(p.shape), queue());
  CheckLaunch("MoeGemm");
}

void CudaBackend::MoeCombine(const MoeCombineParams& p) {
  if (!launching()) return;
  LaunchMoeCombine(p, queue());
  CheckLaunch("MoeCombine");
}

}  // namespace seqboat::cuda
