// Placeholder until the sink-attention kernels land: fails the step loudly.
#include "kernels/cuda_backend_impl.h"

namespace seqboat::cuda {

void CudaBackend::SinkAttention(const Segment*, int, const float*, int,
                                const float*, int, const float*, int,
                                const void*, int64_t, const SinkCacheDims&,
                                const float*, const float*, float*) {
  if (error_.ok()) error_ = absl::UnimplementedError("CUDA SinkAttention");
}

void CudaBackend::SinkCacheAppend(const Segment*, int, const float*, int,
                                  const float*, int, void*, int64_t,
                                  const SinkCacheDims&) {
  if (error_.ok()) error_ = absl::UnimplementedError("CUDA SinkCacheAppend");
}

}  // namespace seqboat::cuda
