// Launchers of the mamba kernels (mamba_kernels.cu).
#ifndef SEQBOAT_KERNELS_MAMBA_KERNELS_H_
#define SEQBOAT_KERNELS_MAMBA_KERNELS_H_

#include <cuda_runtime_api.h>
#include <stdint.h>

namespace seqboat::cuda {}  // namespace seqboat::cuda

#endif  // SEQBOAT_KERNELS_MAMBA_KERNELS_H_
