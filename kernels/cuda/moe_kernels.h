// Launchers of the device-grouped expert kernels (moe_kernels.cu), for the
// ops of engine/backend/moe_params.h: the grouping in one block (a fixed
// order, no atomics, so a replay groups alike), the experts' GEMV over a
// tile of up to 16 pairs a block row (each weight loaded once for the
// tile), and the per-row combine. Pointers are device memory; each launcher
// enqueues on `queue` and returns at once; nothing to do launches nothing.
#ifndef SEQBOAT_KERNELS_CUDA_MOE_KERNELS_H_
#define SEQBOAT_KERNELS_CUDA_MOE_KERNELS_H_

#include "engine/backend/moe_params.h"
#include "kernels/cuda/dense_kernels.h"
#include "kernels/cuda/launch_queue.h"

namespace seqboat::cuda {

void LaunchMoeGroup(const MoeGroupParams& p, LaunchQueue queue);
// `storage`: how every expert's matrix is stored.
void LaunchMoeGemm(const MoeGemmParams& p, Storage storage, LaunchQueue queue);
// Output rows a warp of LaunchMoeGemm computes for `ntiles` tiles of
// `rows`-row experts (1 or 4); it moves no sum's order (for tests).
int MoeGemmRowsPerWarp(int ntiles, int rows);
void LaunchMoeCombine(const MoeCombineParams& p, LaunchQueue queue);

}  // namespace seqboat::cuda

#endif  // SEQBOAT_KERNELS_CUDA_MOE_KERNELS_H_
