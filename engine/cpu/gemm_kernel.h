// The CPU backend's GEMM: y[n, m] (+)= x[n, k] · W[m, k]ᵀ for the skinny
// shapes of decode (n = batch) as well as prefill chunks.
//
// Written for this engine rather than taken from the BLAS because (measured,
// see bench/) OpenBLAS's sgemm packs the weight matrix on every call,
// which at decode batch sizes triples the memory traffic of a step, and its
// sgemv path for n = 1 accumulates in a different order than sgemm, which
// would make a sequence's output depend on what it is batched with. Here every
// output element is one fixed chain: 8-lane FMAs over k in order, one fixed
// horizontal sum, then the k % 8 tail in order, whatever n and whatever tile
// the element falls in. Weights stream from memory once per 64 rows of x.
#ifndef SEQBOAT_ENGINE_CPU_GEMM_KERNEL_H_
#define SEQBOAT_ENGINE_CPU_GEMM_KERNEL_H_

#include <cstdint>

namespace seqboat::cpu {

// y[i, j] = (accumulate ? y[i, j] : 0) + (bias ? bias[j] : 0) + Σ_k x[i, k]
// w[j, k] x rows have stride ldx, y rows ldy, w is dense [m, k]. Threads over
// m.
void SkinnyGemm(const float* x, int ldx, int n, const float* w, int m, int k,
                const float* bias, float* y, int ldy, bool accumulate);

}  // namespace seqboat::cpu

#endif  // SEQBOAT_ENGINE_CPU_GEMM_KERNEL_H_
