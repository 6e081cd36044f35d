// Launcher parameters of CudaBackend's dense ops (dense_ops.cc's Embed and
// ActivateMul, the GEMV branch of cuda_backend.cc's Gemm) from the op's
// arguments: the host half of those ops, apart so that the emulation tests
// (kernels/emu) launch the kernels with exactly the parameters the backend
// builds. No CUDA calls.
#ifndef SEQBOAT_KERNELS_CUDA_DENSE_PARAMS_H_
#define SEQBOAT_KERNELS_CUDA_DENSE_PARAMS_H_

#include <cstdint>

#include "engine/backend/backend.h"
#include "kernels/cuda/dense_kernels.h"

namespace seqboat::cuda {

// dev_ids: the n ids as staged for the device; storage: how `table` is
// stored (CudaBackend::StorageOf).
EmbedParams EmbedParamsFor(const int32_t* dev_ids, int n, const Matrix& table,
                           Storage storage, float scale, float* out);

// As Backend::ActivateMul takes them.
ActivateMulParams ActivateMulParamsFor(const float* a, int lda, const float* b,
                                       int ldb, int n, int f, Activation act,
                                       float* out, int ldo, bool accumulate);

// Backend::Gemm's arguments for n <= kGemvMaxRows; storage: how `w` is
// stored (CudaBackend::StorageOf).
GemvParams GemvParamsFor(const float* x, int ldx, int n, const Matrix& w,
                         Storage storage, const float* bias, float* y, int ldy,
                         bool accumulate);

}  // namespace seqboat::cuda

#endif  // SEQBOAT_KERNELS_CUDA_DENSE_PARAMS_H_
