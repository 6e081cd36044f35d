// Placeholder until the S4D kernel lands: fails the step loudly.
#include "kernels/cuda_backend_impl.h"

namespace seqboat::cuda {

void CudaBackend::S4dScan(const Segment*, int, const float*, int, const float*,
                          const float*, const float*, float*, int64_t, int, int,
                          int, float, float*) {
  if (error_.ok()) error_ = absl::UnimplementedError("CUDA S4dScan");
}

}  // namespace seqboat::cuda
