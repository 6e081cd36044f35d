// Launchers of the seqboat kernels (seqboat_kernels.cu).
#ifndef SEQBOAT_KERNELS_SEQBOAT_KERNELS_H_
#define SEQBOAT_KERNELS_SEQBOAT_KERNELS_H_

#include <cuda_runtime_api.h>
#include <stdint.h>

namespace seqboat::cuda {}  // namespace seqboat::cuda

#endif  // SEQBOAT_KERNELS_SEQBOAT_KERNELS_H_
