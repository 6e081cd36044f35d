// Mamba-1's conv and scan blocks on AVX-512: a 16-entry state vector is one
// register. Called only where the processor runs AVX-512 (CpuBackend's Isa).
// op_math.h is included before the target pragma, so its inline functions
// keep one (baseline) definition across units; `flatten` inlines them here.
#include <algorithm>
#include <cstdint>

#include "engine/backend/mamba_params.h"
#include "engine/backend/op_math.h"
#include "engine/cpu/mamba_ops_isa.h"

#if defined(__clang__)
#pragma clang attribute push(                                      \
    __attribute__((target("avx512f,avx512bw,avx512vl,avx512dq"))), \
    apply_to = function)
#else
#pragma GCC push_options
#pragma GCC target("avx512f,avx512bw,avx512vl,avx512dq")
#endif

#include "engine/cpu/mamba_blocks.h"

namespace seqboat::cpu {

void Avx512ConvBlock(const MambaConvParams& p, int s, int blk) {
  mamba_blocks::ConvBlock(p, s, blk);
}

void Avx512ScanBlock(const MambaScanParams& p, int s, int blk) {
  mamba_blocks::ScanBlock(p, s, blk);
}

}  // namespace seqboat::cpu

#if defined(__clang__)
#pragma clang attribute pop
#else
#pragma GCC pop_options
#endif
