// Mamba-1's conv and scan blocks on AVX-512: a 16-entry state vector is one
// register. Called only where the processor runs AVX-512 (CpuBackend's Isa).
// op_math.h is included before the target pragma, so its inline functions
// keep one (baseline) definition across units; `flatten` inlines them here.
#include <algorithm>
#include <cstdint>

#include "engine/backend/mamba_params.h"
#include "engine/backend/op_math.h"
#include "engine/cpu/avx512_target_begin.h"
#include "engine/cpu/mamba_blocks.h"
#include "engine/cpu/mamba_ops_isa.h"

namespace seqboat::cpu {

void Avx512ConvBlock(const MambaConvParams& p, int s, int blk) {
  mamba_blocks::ConvBlock(p, s, blk);
}

void Avx512ScanBlock(const MambaScanParams& p, int s, int blk) {
  mamba_blocks::ScanBlock(p, s, blk);
}

}  // namespace seqboat::cpu

#include "engine/cpu/avx512_target_end.h"
