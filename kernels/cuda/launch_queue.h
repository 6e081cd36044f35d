// Where a kernel launcher enqueues: the stream, and whether its kernels launch
// early behind the kernel before them (launch.cuh; CudaBackendOptions::
// early_launch). A bare stream converts to a queue that launches plainly, as
// the kernel tests launch.
#ifndef SEQBOAT_KERNELS_CUDA_LAUNCH_QUEUE_H_
#define SEQBOAT_KERNELS_CUDA_LAUNCH_QUEUE_H_

#include <cuda_runtime_api.h>

namespace seqboat::cuda {

struct LaunchQueue {
  // Implicit: a stream is a queue without early launches.
  LaunchQueue(cudaStream_t s, bool e = false)  // NOLINT(runtime/explicit)
      : stream(s), early(e) {}

  cudaStream_t stream;
  bool early;
};

}  // namespace seqboat::cuda

#endif  // SEQBOAT_KERNELS_CUDA_LAUNCH_QUEUE_H_
