// The GEMV launch of CudaBackend::Gemm's small decode batches, from the op's
// params: the host half of that branch, apart so that the emulation tests
// (kernels/cuda/emu) launch the kernel with exactly the parameters the
// backend builds. No CUDA calls.
#ifndef SEQBOAT_KERNELS_CUDA_DENSE_PARAMS_H_
#define SEQBOAT_KERNELS_CUDA_DENSE_PARAMS_H_

#include "engine/backend/dense_params.h"
#include "kernels/cuda/dense_kernels.h"

namespace seqboat::cuda {

// For p.n <= kGemvMaxRows; storage: how p.w is stored
// (CudaBackend::StorageOf).
GemvParams GemvParamsFor(const GemmParams& p, Storage storage);

}  // namespace seqboat::cuda

#endif  // SEQBOAT_KERNELS_CUDA_DENSE_PARAMS_H_
