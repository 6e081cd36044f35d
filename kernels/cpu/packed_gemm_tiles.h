// The micro-kernel and the loop over one GemmBlock, written once over a
// vector type V (Avx2Vec, Avx512Vec) and included only by the instruction-set
// units, after their `#pragma GCC target` and after every header it includes
// (so that only these templates take the wider target): each path gets its
// own instantiations, distinct by V. Not a public header.
//
// A tile is MR rows of x against NV panels (16 outputs each): MR * NV * 16
// fp32 accumulators live in registers for the whole k loop; each k step
// loads NV panel columns (widened from the weight type), broadcasts MR
// values of x and issues MR * NV * (16 / lanes) FMAs. NvFor(mr) picks the
// widest NV whose accumulators, weights and one broadcast fit the register
// file, so the small row counts of decode still have enough independent
// chains to hide the FMA latency.
#ifndef SEQBOAT_KERNELS_CPU_PACKED_GEMM_TILES_H_
#define SEQBOAT_KERNELS_CPU_PACKED_GEMM_TILES_H_

#include <algorithm>
#include <cstdint>

#include "kernels/cpu/packed_gemm.h"
#include "kernels/cpu/packed_matrix.h"

namespace seqboat::cpu {
namespace tiles {

inline constexpr int64_t kKBlock = 256;

template <WeightType T>
struct Elem;
template <>
struct Elem<WeightType::kF32> {
  using type = float;
};
template <>
struct Elem<WeightType::kBf16> {
  using type = uint16_t;
};
template <>
struct Elem<WeightType::kF16> {
  using type = uint16_t;
};
template <>
struct Elem<WeightType::kInt8> {
  using type = int8_t;
};

template <class V, WeightType T, int MR, int NV>
inline void Tile(const float* x, int64_t ldx, const GemmBlock& b, int64_t p,
                 int64_t i) {
  using R = typename V::Reg;
  using E = typename Elem<T>::type;
  constexpr int kVp = kPanel / V::kLanes;  // vectors per panel
  constexpr int kC = NV * kVp;
  const int64_t k = b.w->cols();
  const E* wp[NV];
#pragma GCC unroll 8
  for (int j = 0; j < NV; ++j) wp[j] = static_cast<const E*>(b.w->panel(p + j));
  // Each block of kKBlock columns is its own FMA chain from zero, added to
  // the running total after it: the rounding error then grows with the
  // square root of the block count instead of with k (a 1536-long chain
  // loses about 4x more), and the order is still fixed by k alone.
  R total[MR][kC];
  for (int64_t k0 = 0; k0 < k; k0 += kKBlock) {
    const int64_t k1 = std::min<int64_t>(k, k0 + kKBlock);
    R acc[MR][kC];
#pragma GCC unroll 8
    for (int r = 0; r < MR; ++r) {
#pragma GCC unroll 8
      for (int c = 0; c < kC; ++c) acc[r][c] = V::Zero();
    }
    for (int64_t kk = k0; kk < k1; ++kk) {
      R wv[kC];
#pragma GCC unroll 8
      for (int j = 0; j < NV; ++j) {
#pragma GCC unroll 2
        for (int v = 0; v < kVp; ++v)
          wv[j * kVp + v] =
              V::template Load<T>(wp[j] + kk * kPanel + v * V::kLanes);
      }
#pragma GCC unroll 8
      for (int r = 0; r < MR; ++r) {
        const R xb = V::Set1(x[r * ldx + kk]);
#pragma GCC unroll 8
        for (int c = 0; c < kC; ++c) acc[r][c] = V::Fma(xb, wv[c], acc[r][c]);
      }
    }
#pragma GCC unroll 8
    for (int r = 0; r < MR; ++r) {
#pragma GCC unroll 8
      for (int c = 0; c < kC; ++c)
        total[r][c] = k0 == 0 ? acc[r][c] : V::Add(total[r][c], acc[r][c]);
    }
  }
  if (k == 0) {
#pragma GCC unroll 8
    for (int r = 0; r < MR; ++r) {
#pragma GCC unroll 8
      for (int c = 0; c < kC; ++c) total[r][c] = V::Zero();
    }
  }
  // out = dot (* scale) (+ bias); y = accumulate ? y + out : out. The same
  // vector operations for every lane, the last panel's included (masked), so
  // that no element takes a different rounding path.
  const int64_t m = b.w->rows();
  const float* scales = b.w->scales();
#pragma GCC unroll 8
  for (int c = 0; c < kC; ++c) {
    const int64_t col = (p + c / kVp) * kPanel + (c % kVp) * V::kLanes;
    const int live = static_cast<int>(std::min<int64_t>(V::kLanes, m - col));
    if (live <= 0) continue;
    R scale = V::Zero(), bias = V::Zero();
    if constexpr (T == WeightType::kInt8) scale = V::Load(scales + col);
    if (b.bias != nullptr) bias = V::LoadPartial(b.bias + col, live);
#pragma GCC unroll 8
    for (int r = 0; r < MR; ++r) {
      R out = total[r][c];
      if constexpr (T == WeightType::kInt8) out = V::Mul(out, scale);
      if (b.bias != nullptr) out = V::Add(out, bias);
      float* y = b.y + (i + r) * b.ldy + col;
      if (b.accumulate) out = V::Add(V::LoadPartial(y, live), out);
      V::StorePartial(y, live, out);
    }
  }
}

// The widest panel group for mr rows (see the header comment).
template <class V>
constexpr int NvFor(int mr) {
  if constexpr (V::kLanes == 16) {  // 32 zmm registers, one per panel
    return mr <= 2 ? 8 : mr <= 4 ? 6 : mr <= 6 ? 4 : 3;
  } else {  // 16 ymm registers, two per panel
    return mr == 1 ? 4 : mr == 2 ? 3 : mr == 3 ? 2 : 1;
  }
}

// Tile<MR, nv> for a run-time nv in 1..NV.
template <class V, WeightType T, int MR, int NV>
inline void TileUpTo(int nv, const float* x, int64_t ldx, const GemmBlock& b,
                     int64_t p, int64_t i) {
  if constexpr (NV >= 1) {
    if (nv == NV) {
      Tile<V, T, MR, NV>(x, ldx, b, p, i);
    } else {
      TileUpTo<V, T, MR, NV - 1>(nv, x, ldx, b, p, i);
    }
  }
}

// Rows [i, i + MR) against panels [p0, p1).
template <class V, WeightType T, int MR>
void RowTile(const GemmBlock& b, int64_t i) {
  constexpr int kNv = NvFor<V>(MR);
  const float* x = b.x + i * b.ldx;
  for (int64_t p = b.p0; p < b.p1; p += kNv) {
    const int nv = static_cast<int>(std::min<int64_t>(kNv, b.p1 - p));
    TileUpTo<V, T, MR, kNv>(nv, x, b.ldx, b, p, i);
  }
}

template <class V, WeightType T, int MR>
void RowTileUpTo(int mr, const GemmBlock& b, int64_t i) {
  if constexpr (MR >= 1) {
    if (mr == MR) {
      RowTile<V, T, MR>(b, i);
    } else {
      RowTileUpTo<V, T, MR - 1>(mr, b, i);
    }
  }
}

template <class V, WeightType T>
void Block(const GemmBlock& b) {
  for (int64_t i = 0; i < b.n; i += V::kMaxRows) {
    const int mr = static_cast<int>(std::min<int64_t>(V::kMaxRows, b.n - i));
    RowTileUpTo<V, T, V::kMaxRows>(mr, b, i);
  }
}

template <class V>
void AnyBlock(const GemmBlock& b) {
  switch (b.w->type()) {
    case WeightType::kF32:
      return Block<V, WeightType::kF32>(b);
    case WeightType::kBf16:
      return Block<V, WeightType::kBf16>(b);
    case WeightType::kF16:
      return Block<V, WeightType::kF16>(b);
    case WeightType::kInt8:
      return Block<V, WeightType::kInt8>(b);
  }
}

}  // namespace tiles
}  // namespace seqboat::cpu

#endif  // SEQBOAT_KERNELS_CPU_PACKED_GEMM_TILES_H_
