// The host halves of CudaBackend's dense ops that build launch parameters
// (Gemm's GEMV branch for small decode batches, its 16-bit input rule,
// Embed's map of fed ids),
// apart so that the emulation tests (kernels/cuda/emu) launch the kernels
// with exactly what the backend builds. No CUDA calls.
#ifndef SEQBOAT_KERNELS_CUDA_DENSE_PARAMS_H_
#define SEQBOAT_KERNELS_CUDA_DENSE_PARAMS_H_

#include <cstdint>
#include <vector>

#include "engine/backend/dense_params.h"
#include "kernels/cuda/dense_kernels.h"
#include "kernels/cuda/gemv_kernels.h"

namespace seqboat::cuda {

// For p.n <= kGemvMaxRows; storage: how p.w is stored
// (CudaBackend::StorageOf); partials: the caller's scratch of
// GemvPartialFloats floats (null when that is 0). p.conv is copied as it
// is: a device caller replaces conv.segs (host) with their staged copy.
GemvParams GemvParamsFor(const GemmParams& p, Storage storage,
                         float* partials = nullptr);

// Whether the GEMV applies p.conv (GemmConv) in its epilogue: a call of
// n <= kGemvMaxRows whose every segment is a decode row or padding
// (AllDecodeRows). Other calls with a conv run the GEMM without it, then
// the conv op on its output (ConvOfGemm).
bool GemvAppliesConv(const GemmParams& p);

// Backend::GemmInputFormat of the CUDA backend for a matrix stored as `s`
// at n rows: what its cuBLAS branch reads (CublasInputFormat); kNone for the
// GEMV (n <= kGemvMaxRows), which reads fp32.
HalfFormat GemmInputFormatFor(Storage s, int n);

// Whether CudaBackend::Gemm reads p.x16 (GemmParams) rather than converting
// p.x: the copy is in the format that GemmInputFormatFor names, and no norm
// is folded in.
bool GemmReadsX16(const GemmParams& p, Storage s);

// The embedding's per-row map of fed ids (EmbedParams::fed_*), as the
// kernel reads it: -(from + 2) for a row fed from fed_tokens[from], -1 for
// the others. Every row has an entry, fed or not, so that a step's staging
// does not depend on which rows are fed (a recorded graph replays it), and
// the entries are negative, so that no other descriptor of the step equals
// the map and shares its staged copy.
void FedMapFor(const EmbedParams& p, std::vector<int32_t>* map);

}  // namespace seqboat::cuda

#endif  // SEQBOAT_KERNELS_CUDA_DENSE_PARAMS_H_
