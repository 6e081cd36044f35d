// The CPU backend's GEMM: y[n, m] (+)= x[n, k] · Wᵀ (+ bias) with W a
// PackedMatrix [m, k] and x, y fp32.
//
// Every output element is computed in one fixed order: fp32 FMA chains over
// consecutive blocks of 256 columns of k, each from zero, summed block after
// block, then scaled (int8), biased and stored: whatever n is, whatever tile
// or thread the element falls in, and on every instruction-set path. A row's
// result is therefore bitwise the same whatever it is batched with (what
// keeps a sequence's tokens independent of its neighbours), and the AVX2 and
// AVX-512 paths agree bit for bit.
//
// Threads split the panels (output columns); x's rows are read in blocks
// that stay in cache while a thread's panels stream past, so at decode batch
// sizes the weights are read from memory once per call.
#ifndef SEQBOAT_KERNELS_CPU_PACKED_GEMM_H_
#define SEQBOAT_KERNELS_CPU_PACKED_GEMM_H_

#include <cstdint>

#include "kernels/cpu/cpu_isa.h"
#include "kernels/cpu/packed_matrix.h"

namespace seqboat::cpu {

// x rows have stride ldx, y rows ldy; bias (m floats) may be null;
// accumulate adds into y. `isa` must be one the processor runs (ChooseIsa).
void PackedGemm(Isa isa, const float* x, int64_t ldx, int n,
                const PackedMatrix& w, const float* bias, float* y, int64_t ldy,
                bool accumulate);

// One thread's share of a call: rows [0, n) of x against panels [p0, p1).
// What the instruction-set units implement (packed_gemm_avx2.cc,
// packed_gemm_avx512.cc); PackedGemm is the caller.
struct GemmBlock {
  const float* x;
  int64_t ldx;
  int n;
  const PackedMatrix* w;
  int64_t p0, p1;
  const float* bias;
  float* y;
  int64_t ldy;
  bool accumulate;
};
void Avx2GemmBlock(const GemmBlock& b);
void Avx512GemmBlock(const GemmBlock& b);
// Panels per tile when n rows are multiplied: a thread's chunks of panels
// are made multiples of it, so that no chunk ends in a narrower tile.
int Avx2TilePanels(int n);
int Avx512TilePanels(int n);

}  // namespace seqboat::cpu

#endif  // SEQBOAT_KERNELS_CPU_PACKED_GEMM_H_
