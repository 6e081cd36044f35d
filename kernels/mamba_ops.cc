// Placeholder until the Mamba-1 kernels land: fails the step loudly.
#include "kernels/cuda_backend_impl.h"

namespace seqboat::cuda {

void CudaBackend::MambaConv(const Segment*, int, const float*, int, float*,
                            int64_t, const float*, const float*, int, int,
                            float*) {
  if (error_.ok()) error_ = absl::UnimplementedError("CUDA MambaConv");
}

void CudaBackend::MambaScan(const Segment*, int, const float*, const float*,
                            const float*, int, const float*, int, const float*,
                            const float*, const float*, float*, int64_t, int,
                            int, float*) {
  if (error_.ok()) error_ = absl::UnimplementedError("CUDA MambaScan");
}

}  // namespace seqboat::cuda
