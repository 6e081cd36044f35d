// Mamba-1's conv and scan over one (segment, block of channels) pair, written
// once and compiled per instruction set (mamba_ops.cc for AVX2,
// mamba_ops_avx512.cc under its target pragma; the backend picks by its Isa).
// A block's per-channel scalars (the step sizes' softplus, the gates' SiLU)
// are computed in passes over the block that vectorise across channels; a
// channel's state vector is then one or two registers. The scan takes the
// unit's vector type V for the one step that needs shuffles (DotRows16).
// Included only by those units, after op_math.h and after their pragma. Not a
// public header.
#ifndef SEQBOAT_KERNELS_CPU_MAMBA_BLOCKS_H_
#define SEQBOAT_KERNELS_CPU_MAMBA_BLOCKS_H_

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

// out[j] = SiLU(out[j]) for `width` channels: one function for both conv
// paths, so that a token's output has the same bits in a decode row and in a
// longer segment (the fast-math build may otherwise compile the two loops'
// Exp differently; their sums are explicit fmas for the same reason), which
// speculative rounds rely on.
__attribute__((flatten, noinline)) static void SiluInPlace(
    float* __restrict out, int width) {
  for (int j = 0; j < width; ++j) out[j] = op_math::SiluByExp(out[j]);
}

// One token over `width` channels: part of a decode row. The windows stay
// where they lie ([channel][tap], one contiguous run of the slot's state;
// turning them tap-major and back would cost more than the token does), and
// the compiler loads and stores the windows of 8 or 16 channels as whole
// vectors with permutes. The taps come tap-major (`taps`: [kK][ld_taps],
// turned once per call), which spares as many permutes again. Apart, with
// restricted pointers, so that it vectorises without aliasing checks. The
// sum is op_math::ConvSum's, in its order.
template <int kK>
__attribute__((flatten, noinline)) static void ConvOneToken(
    float* __restrict windows, const float* __restrict taps,
    const float* __restrict bias, const float* __restrict x,
    float* __restrict out, int width, int ld_taps) {
  constexpr int kW = kK - 1;
  for (int j = 0; j < width; ++j) {
    float* win = windows + j * kW;
    float acc = bias[j];
    for (int i = 0; i < kW; ++i) acc = fmaf(taps[i * ld_taps + j], win[i], acc);
    acc = fmaf(taps[kW * ld_taps + j], x[j], acc);
    for (int i = 0; i + 1 < kW; ++i) win[i] = win[i + 1];
    win[kW - 1] = x[j];
    out[j] = acc;
  }
  SiluInPlace(out, width);
}

// Segment s, which has one token, with d_conv 4 (every Mamba checkpoint),
// by blocks of channels; taps: p.w turned tap-major, [4][e]. One contiguous
// run of state per slot, streamed: at batch 32 and 128 this is 15-25 %
// faster than blocks of channels across 16 slots (mamba_ops_bench).
SEQBOAT_MAMBA_BLOCK void ConvSegmentOneToken(const MambaConvParams& p, int s,
                                             const float* taps) {
  constexpr int kW = 3;  // floats of a channel's window
  const Segment& seg = p.segs[s];
  float* windows = p.state + seg.slot * p.state_stride;
  const float* x = p.x + static_cast<int64_t>(seg.start) * p.ldx;
  float* out = p.out + static_cast<int64_t>(seg.start) * p.e;
  // The next slot's windows are a jump away: each block of channels asks L2
  // for the same block of them, so they stream in a slot ahead.
  const char* next = reinterpret_cast<const char*>(
      p.state + p.segs[s + 1 < p.nsegs ? s + 1 : s].slot * p.state_stride);
  for (int c0 = 0; c0 < p.e; c0 += kBlock) {
    const int width = std::min(kBlock, p.e - c0);
    const int64_t bytes = int64_t{width} * kW * sizeof(float);
    for (int64_t b = 0; b < bytes; b += 64)
      __builtin_prefetch(next + c0 * kW * sizeof(float) + b, 1, 2);
    // Without a bias, zeros from memory, not a constant: the sum then
    // rounds as ConvTapMajor's does (a constant 0 lets the fast-math build
    // reorder it), so a token gives the same bits in a decode row and in a
    // longer segment, which speculative rounds rely on.
    static constexpr float kZeros[kBlock] = {};
    ConvOneToken<kW + 1>(windows + c0 * kW, taps + c0,
                         p.bias != nullptr ? p.bias + c0 : kZeros, x + c0,
                         out + c0, width, p.e);
  }
}

// d_conv 4 (every Mamba checkpoint), taps: p.w turned tap-major, [kK][e]
// (once per call, by MambaConv). Each segment's windows are turned
// tap-major too ([tap][channel], in a local array), so that a token is kK
// vector FMAs across channels and the shift is whole vectors; the windows
// go back to the state's [channel][tap] layout after the segment's last
// token. The sum is op_math::ConvSum's, in its order.
template <int kK>
SEQBOAT_MAMBA_BLOCK void ConvTapMajor(const MambaConvParams& p, int s0, int s1,
                                      int c0, int width,
                                      const float* __restrict taps) {
  constexpr int kW = kK - 1;
  float win[kW][kBlock], bias[kBlock];
  const float* __restrict w[kK];
  for (int i = 0; i < kK; ++i) w[i] = taps + static_cast<int64_t>(i) * p.e + c0;
  for (int j = 0; j < width; ++j) {
    bias[j] = p.bias != nullptr ? p.bias[c0 + j] : 0.0f;
  }
  for (int s = s0; s < s1; ++s) {
    const Segment& seg = p.segs[s];
    // A zero-length segment may share a live one's slot: it touches nothing.
    // One-token segments have their own pass (ConvSegmentOneToken).
    if (seg.len <= 1) continue;
    float* windows =
        p.state + seg.slot * p.state_stride + static_cast<int64_t>(c0) * kW;
    if (s + 1 < s1) {
      // The next segment's windows are a jump away: ask for them now.
      const char* next = reinterpret_cast<const char*>(
          p.state + p.segs[s + 1].slot * p.state_stride +
          static_cast<int64_t>(c0) * kW);
      for (int b = 0; b < width * kW * 4; b += 64)
        __builtin_prefetch(next + b, 1);
    }
    for (int j = 0; j < width; ++j) {
      for (int i = 0; i < kW; ++i) win[i][j] = windows[j * kW + i];
    }
    for (int t = seg.start; t < seg.start + seg.len; ++t) {
      const float* x = p.x + static_cast<int64_t>(t) * p.ldx + c0;
      float* out = p.out + static_cast<int64_t>(t) * p.e + c0;
      for (int j = 0; j < width; ++j) {
        float acc = bias[j];
        for (int i = 0; i < kW; ++i) acc = fmaf(w[i][j], win[i][j], acc);
        acc = fmaf(w[kW][j], x[j], acc);
        out[j] = acc;
      }
      SiluInPlace(out, width);
      for (int i = 0; i + 1 < kW; ++i) {
        for (int j = 0; j < width; ++j) win[i][j] = win[i + 1][j];
      }
      for (int j = 0; j < width; ++j) win[kW - 1][j] = x[j];
    }
    for (int j = 0; j < width; ++j) {
      for (int i = 0; i < kW; ++i) windows[j * kW + i] = win[i][j];
    }
  }
}

// Segments [s0, s1) over one block of channels; taps as ConvTapMajor's
// when d_conv is 4, else unused.
SEQBOAT_MAMBA_BLOCK void ConvBlock(const MambaConvParams& p, int s0, int s1,
                                   int blk, const float* taps) {
  const int e = p.e, k = p.k;
  const int c0 = blk * kBlock;
  const int width = std::min(kBlock, e - c0);
  if (k == 4) return ConvTapMajor<4>(p, s0, s1, c0, width, taps);
  for (int s = s0; s < s1; ++s) {
    const Segment& seg = p.segs[s];
    float* windows = p.state + seg.slot * p.state_stride +
                     static_cast<int64_t>(c0) * (k - 1);
    for (int t = seg.start; t < seg.start + seg.len; ++t) {
      const float* x = p.x + static_cast<int64_t>(t) * p.ldx + c0;
      float* out = p.out + static_cast<int64_t>(t) * e + c0;
      for (int j = 0; j < width; ++j) {
        const int c = c0 + j;
        out[j] =
            op_math::ConvSum(windows + static_cast<int64_t>(j) * (k - 1),
                             p.w + static_cast<int64_t>(c) * k,
                             p.bias != nullptr ? p.bias[c] : 0.0f, x[j], k);
      }
      for (int j = 0; j < width; ++j) out[j] = op_math::SiluByExp(out[j]);
    }
  }
}

// The state rows of `width` channels (16 entries each) at one token. Apart,
// with restricted pointers, so that the row loop holds the Exp constants in
// registers and carries no aliasing checks.
__attribute__((flatten, noinline)) static void UpdateRows16(
    float* __restrict h, const float* __restrict a, const float* __restrict b,
    const float* __restrict delta, const float* __restrict x, int width) {
  constexpr int kN = 16;
  // The per-channel scalars first, in one vectorised pass: in the row loop
  // they are then a broadcast load each, not arithmetic and a register
  // broadcast per row (7 % of the scan).
  float dxs[kBlock], dls[kBlock];
  for (int j = 0; j < width; ++j) {
    dxs[j] = delta[j] * x[j];
    dls[j] = delta[j] * op_math::kLog2e;
  }
  for (int j = 0; j < width; ++j) {
    const float dx = dxs[j], delta_log2e = dls[j];
    // The state streams from memory at large batches: ask for the line a
    // block (one 4 KiB page, where the hardware prefetcher stops) ahead into
    // L1, and two blocks ahead into L2 (scan at batch 128 about 8 % faster
    // than with the first alone; four or eight blocks measured the same).
    __builtin_prefetch(h + j * kN + kBlock * kN, 1);
    __builtin_prefetch(h + j * kN + 2 * kBlock * kN, 1, 2);
    for (int i = 0; i < kN; ++i) {
      h[j * kN + i] = op_math::ScanEntry(h[j * kN + i], a[j * kN + i], b[i],
                                         delta_log2e, dx);
    }
  }
}

// One token of a block with d_state 16 (Mamba-1 checkpoints use it almost
// without exception): each channel's state is updated as one vector, then
// C·h for 16 channels at a time is V::DotRows16, which sums 16 rows with
// one transposing tree instead of a horizontal sum per channel.
template <class V>
SEQBOAT_MAMBA_BLOCK void ScanToken16(const MambaScanParams& p,
                                     const Segment& seg, int64_t row, int c0,
                                     int width, const float* delta,
                                     const float* gate) {
  constexpr int kN = 16;
  const float* b = p.bc + row * p.ldbc;
  const float* c = b + kN;
  const float* x = p.x + row * p.e + c0;
  float* h0 =
      p.state + seg.slot * p.state_stride + static_cast<int64_t>(c0) * kN;
  const float* a0 = p.a + static_cast<int64_t>(c0) * kN;
  UpdateRows16(h0, a0, b, delta, x, width);
  float y[kBlock];
  int j = 0;
  for (; j + 16 <= width; j += 16) V::DotRows16(h0 + j * kN, c, y + j);
  for (; j < width; ++j) {
    float sum = 0.0f;
    for (int i = 0; i < kN; ++i) sum += c[i] * h0[j * kN + i];
    y[j] = sum;
  }
  float* out = p.out + row * p.e + c0;
  const float* d = p.d + c0;
  for (j = 0; j < width; ++j)
    out[j] = op_math::ScanOutput(y[j], d[j], x[j], gate[j]);
}

// Any other d_state: op_math::ScanState per channel.
SEQBOAT_MAMBA_BLOCK void ScanTokenAnyN(const MambaScanParams& p,
                                       const Segment& seg, int64_t row, int c0,
                                       int width, const float* delta,
                                       const float* gate) {
  const int e = p.e, n_state = p.n_state;
  const float* b_row = p.bc + row * p.ldbc;
  for (int j = 0; j < width; ++j) {
    const int c = c0 + j;
    float* h =
        p.state + seg.slot * p.state_stride + static_cast<int64_t>(c) * n_state;
    const float x = p.x[row * e + c];
    const float y =
        op_math::ScanState(h, p.a + static_cast<int64_t>(c) * n_state, b_row,
                           b_row + n_state, delta[j], x, n_state);
    p.out[row * e + c] = op_math::ScanOutput(y, p.d[c], x, gate[j]);
  }
}

template <class V>
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
    if (p.n_state == 16) {
      ScanToken16<V>(p, seg, row, c0, width, delta, gate);
    } else {
      ScanTokenAnyN(p, seg, row, c0, width, delta, gate);
    }
  }
}

#undef SEQBOAT_MAMBA_BLOCK

}  // namespace seqboat::cpu::mamba_blocks

#endif  // SEQBOAT_KERNELS_CPU_MAMBA_BLOCKS_H_
