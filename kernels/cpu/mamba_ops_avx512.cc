// Mamba-1's conv and scan blocks on AVX-512: a 16-entry state vector is one
// register. Called only where the processor runs AVX-512 (CpuBackend's Isa).
// op_math.h is included before the target pragma, so its inline functions
// keep one (baseline) definition across units; `flatten` inlines them here.
#include <immintrin.h>

#include <algorithm>
#include <cstdint>

#include "engine/backend/mamba_params.h"
#include "engine/backend/op_math.h"
#include "kernels/cpu/avx512_target_begin.h"
#include "kernels/cpu/mamba_blocks.h"
#include "kernels/cpu/mamba_ops_isa.h"

namespace seqboat::cpu {
namespace {

struct Avx512Vec {
  // out[j] = Σ_i c[i] h[16 j + i] for 16 rows, one register each: a tree of
  // unpacks (pairs of rows), in-lane shuffles (fours) and 128-bit lane
  // shuffles (eights, sixteens) that halves the lanes each row holds at every
  // level and leaves row j's sum in lane j. Every row takes the same order:
  // ((p0 + p2) + (p1 + p3)) per 4 lanes, then those 4 sums pairwise.
  static void DotRows16(const float* h, const float* c, float* out) {
    const __m512 cv = _mm512_loadu_ps(c);
    __m512 q[16];
    for (int j = 0; j < 16; ++j)
      q[j] = _mm512_mul_ps(_mm512_loadu_ps(h + 16 * j), cv);
    __m512 s[8];
    for (int j = 0; j < 8; ++j) {
      s[j] = _mm512_add_ps(_mm512_unpacklo_ps(q[2 * j], q[2 * j + 1]),
                           _mm512_unpackhi_ps(q[2 * j], q[2 * j + 1]));
    }
    __m512 v[4];
    for (int j = 0; j < 4; ++j) {
      v[j] = _mm512_add_ps(_mm512_shuffle_ps(s[2 * j], s[2 * j + 1], 0x44),
                           _mm512_shuffle_ps(s[2 * j], s[2 * j + 1], 0xee));
    }
    __m512 w[2];
    for (int j = 0; j < 2; ++j) {
      w[j] = _mm512_add_ps(_mm512_shuffle_f32x4(v[2 * j], v[2 * j + 1], 0x88),
                           _mm512_shuffle_f32x4(v[2 * j], v[2 * j + 1], 0xdd));
    }
    _mm512_storeu_ps(out,
                     _mm512_add_ps(_mm512_shuffle_f32x4(w[0], w[1], 0x88),
                                   _mm512_shuffle_f32x4(w[0], w[1], 0xdd)));
  }
};

}  // namespace

void Avx512ConvBlock(const MambaConvParams& p, int s0, int s1, int blk,
                     const float* taps) {
  mamba_blocks::ConvBlock(p, s0, s1, blk, taps);
}

void Avx512ConvOneToken(const MambaConvParams& p, int s, const float* taps) {
  mamba_blocks::ConvSegmentOneToken(p, s, taps);
}

void Avx512ScanBlock(const MambaScanParams& p, int s, int blk) {
  mamba_blocks::ScanBlock<Avx512Vec>(p, s, blk);
}

}  // namespace seqboat::cpu

#include "kernels/cpu/avx512_target_end.h"
