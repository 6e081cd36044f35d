// Mamba's conv over segments [s0, s1) and Mamba-1's scan over one segment,
// each for one block of channels, and the conv of one one-token segment
// over all channels (taps turned tap-major, [k][e]), per instruction set
// (mamba_blocks.h compiled for each). Not a public header.
#ifndef SEQBOAT_KERNELS_CPU_MAMBA_OPS_ISA_H_
#define SEQBOAT_KERNELS_CPU_MAMBA_OPS_ISA_H_

#include "engine/backend/mamba_params.h"

namespace seqboat::cpu {

void Avx2ConvBlock(const MambaConvParams& p, int s0, int s1, int blk,
                   const float* taps);
void Avx2ConvOneToken(const MambaConvParams& p, int s, const float* taps);
void Avx2ScanBlock(const MambaScanParams& p, int s, int blk);
void Avx512ConvBlock(const MambaConvParams& p, int s0, int s1, int blk,
                     const float* taps);
void Avx512ConvOneToken(const MambaConvParams& p, int s, const float* taps);
void Avx512ScanBlock(const MambaScanParams& p, int s, int blk);

}  // namespace seqboat::cpu

#endif  // SEQBOAT_KERNELS_CPU_MAMBA_OPS_ISA_H_
