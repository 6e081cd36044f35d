// Mamba-1's conv and scan over one (segment, block of channels) pair, written
// once and compiled per instruction set (mamba_ops.cc for AVX2,
// mamba_ops_avx512.cc under its target pragma; the backend picks by its Isa).
// A block's per-channel scalars (the step sizes' softplus, the gates' SiLU)
// are computed in passes over the block that vectorise across channels; a
// channel's state vector is then one or two registers. Included only by those
// units, after op_math.h and after their pragma. Not a public header.
#ifndef SEQBOAT_ENGINE_CPU_MAMBA_BLOCKS_H_
#define SEQBOAT_ENGINE_CPU_MAMBA_BLOCKS_H_

#include <algorithm>
#include <cstdint>

#include "engine/backend/mamba_params.h"
#include "engine/backend/op_math.h"

namespace seqboat::cpu::mamba_blocks {

// Channels whose per-token scalars are computed together.
inline constexpr int kBlock = 64;

// The ops' `flatten` inlines op_math's functions, so that they are
// vectorised for the caller's target rather than called in their
// baseline form.
#define SEQBOAT_MAMBA_BLOCK __attribute__((flatten)) static inline

SEQBOAT_MAMBA_BLOCK void ConvBlock(const MambaConvParams& p, int s, int blk) {
  const int e = p.e, k = p.k;
  const Segment& seg = p.segs[s];
  const int c0 = blk * kBlock;
  const int width = std::min(kBlock, e - c0);
  float* windows =
      p.state + seg.slot * p.state_stride + static_cast<int64_t>(c0) * (k - 1);
  for (int t = seg.start; t < seg.start + seg.len; ++t) {
    const float* x = p.x + static_cast<int64_t>(t) * p.ldx + c0;
    float* out = p.out + static_cast<int64_t>(t) * e + c0;
    for (int j = 0; j < width; ++j) {
      const int c = c0 + j;
      out[j] = op_math::ConvSum(windows + static_cast<int64_t>(j) * (k - 1),
                                p.w + static_cast<int64_t>(c) * k,
                                p.bias != nullptr ? p.bias[c] : 0.0f, x[j], k);
    }
    for (int j = 0; j < width; ++j) out[j] = op_math::SiluByExp(out[j]);
  }
}

// One token of a block: kN > 0 fixes the state size at compile time (the
// loop over it unrolls into whole registers and one horizontal sum), 0
// takes it from p.
template <int kN>
SEQBOAT_MAMBA_BLOCK void ScanToken(const MambaScanParams& p, const Segment& seg,
                                   int64_t row, int c0, int width,
                                   const float* delta, const float* gate) {
  const int e = p.e, n_state = kN > 0 ? kN : p.n_state;
  const float* b_row = p.bc + row * p.ldbc;
  for (int j = 0; j < width; ++j) {
    const int c = c0 + j;
    float* h =
        p.state + seg.slot * p.state_stride + static_cast<int64_t>(c) * n_state;
    const float x = p.x[row * e + c];
    const float y =
        op_math::ScanState(h, p.a + static_cast<int64_t>(c) * n_state, b_row,
                           b_row + n_state, delta[j], x, n_state);
    p.out[row * e + c] = (y + p.d[c] * x) * gate[j];
  }
}

SEQBOAT_MAMBA_BLOCK void ScanBlock(const MambaScanParams& p, int s, int blk) {
  const int e = p.e;
  const Segment& seg = p.segs[s];
  const int c0 = blk * kBlock;
  const int width = std::min(kBlock, e - c0);
  float delta[kBlock], gate[kBlock];
  for (int t = seg.start; t < seg.start + seg.len; ++t) {
    const int64_t row = t;
    const float* dt = p.dt + row * e + c0;
    const float* z = p.z + row * p.ldz + c0;
    const float* bias = p.dt_bias + c0;
    for (int j = 0; j < width; ++j)
      delta[j] = op_math::ScanDelta(dt[j], bias[j]);
    for (int j = 0; j < width; ++j) gate[j] = op_math::SiluByExp(z[j]);
    // Mamba-1 checkpoints use d_state 16 almost without exception.
    if (p.n_state == 16) {
      ScanToken<16>(p, seg, row, c0, width, delta, gate);
    } else {
      ScanToken<0>(p, seg, row, c0, width, delta, gate);
    }
  }
}

#undef SEQBOAT_MAMBA_BLOCK

}  // namespace seqboat::cpu::mamba_blocks

#endif  // SEQBOAT_ENGINE_CPU_MAMBA_BLOCKS_H_
