// Placeholder until the SeqBoat kernels land: fails the step loudly.
#include "kernels/cuda_backend_impl.h"

namespace seqboat::cuda {

void CudaBackend::SeqBoatEma(const Segment*, int, const float*, void*, int64_t,
                             const SeqBoatShape&, const float*, const float*,
                             const float*, const float*, float*) {
  if (error_.ok()) error_ = absl::UnimplementedError("CUDA SeqBoatEma");
}

void CudaBackend::SeqBoatRoute(const float*, int, int, const float*, float*,
                               int32_t*, int32_t*) {
  if (error_.ok()) error_ = absl::UnimplementedError("CUDA SeqBoatRoute");
}

void CudaBackend::SeqBoatAttend(const Segment*, int, const SeqBoatActiveRange*,
                                const int32_t*, const float*, int, void*,
                                int64_t, const SeqBoatShape&, const float*,
                                const float*, const float*, float*) {
  if (error_.ok()) error_ = absl::UnimplementedError("CUDA SeqBoatAttend");
}

void CudaBackend::SeqBoatMix(const float*, const float*, int, const float*,
                             const float*, const int32_t*, int, int, float*) {
  if (error_.ok()) error_ = absl::UnimplementedError("CUDA SeqBoatMix");
}

}  // namespace seqboat::cuda
