// Launchers of the device-grouped expert kernels (moe_kernels.cu), for the
// ops of engine/backend/moe_params.h: the grouping in one block (a fixed
// order, no atomics, so a replay groups alike), the experts' GEMV over a
// tile of up to 16 pairs a block row (each weight loaded once for the
// tile), and the per-row combine. Pointers are device memory; each launcher
// enqueues on `stream` and returns at once; nothing to do launches nothing.
#ifndef SEQBOAT_KERNELS_CUDA_MOE_KERNELS_H_
#define SEQBOAT_KERNELS_CUDA_MOE_KERNELS_H_

#include <cuda_runtime_api.h>

#include "engine/backend/moe_params.h"
#include "kernels/cuda/dense_kernels.h"

namespace seqboat::cuda {

void LaunchMoeGroup(const MoeGroupParams& p, cudaStream_t stream);
// `storage`: how every expert's matrix is stored.
void LaunchMoeGemm(const MoeGemmParams& p, Storage storage,
                   cudaStream_t stream);
void LaunchMoeCombine(const MoeCombineParams& p, cudaStream_t stream);

}  // namespace seqboat::cuda

#endif  // SEQBOAT_KERNELS_CUDA_MOE_KERNELS_H_
