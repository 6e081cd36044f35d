// The packed GEMM on AVX2 + FMA + F16C: the build's baseline (x86-64-v3), so
// no target pragma is needed; 8 lanes, two registers per panel.
#include <immintrin.h>

#include <algorithm>
#include <cstdint>

#include "kernels/cpu/packed_gemm.h"
#include "kernels/cpu/packed_gemm_tiles.h"
#include "kernels/cpu/packed_matrix.h"

namespace seqboat::cpu {
namespace {

struct Avx2Vec {
  using Reg = __m256;
  static constexpr int kLanes = 8;
  // 6 rows x 2 registers: 12 accumulators, 2 weights, 1 broadcast.
  static constexpr int kMaxRows = 6;

  static Reg Zero() { return _mm256_setzero_ps(); }
  static Reg Set1(float v) { return _mm256_set1_ps(v); }
  static Reg Fma(Reg a, Reg b, Reg c) { return _mm256_fmadd_ps(a, b, c); }
  static Reg Mul(Reg a, Reg b) { return _mm256_mul_ps(a, b); }
  static Reg Add(Reg a, Reg b) { return _mm256_add_ps(a, b); }
  static Reg Load(const float* p) { return _mm256_loadu_ps(p); }

  static __m256i Mask(int live) {
    const __m256i lane = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
    return _mm256_cmpgt_epi32(_mm256_set1_epi32(live), lane);
  }
  static Reg LoadPartial(const float* p, int live) {
    if (live == kLanes) return _mm256_loadu_ps(p);
    return _mm256_maskload_ps(p, Mask(live));
  }
  static void StorePartial(float* p, int live, Reg v) {
    if (live == kLanes) {
      _mm256_storeu_ps(p, v);
    } else {
      _mm256_maskstore_ps(p, Mask(live), v);
    }
  }

  template <WeightType T>
  static Reg Load(const typename tiles::Elem<T>::type* p) {
    if constexpr (T == WeightType::kF32) {
      return _mm256_load_ps(p);
    } else if constexpr (T == WeightType::kBf16) {
      const __m128i h = _mm_load_si128(reinterpret_cast<const __m128i*>(p));
      return _mm256_castsi256_ps(
          _mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16));
    } else if constexpr (T == WeightType::kF16) {
      return _mm256_cvtph_ps(
          _mm_load_si128(reinterpret_cast<const __m128i*>(p)));
    } else {
      const __m128i q = _mm_loadl_epi64(reinterpret_cast<const __m128i*>(p));
      return _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(q));
    }
  }
};

}  // namespace

void Avx2GemmBlock(const GemmBlock& b) { tiles::AnyBlock<Avx2Vec>(b); }

int Avx2TilePanels(int n) {
  return tiles::NvFor<Avx2Vec>(std::min(n, Avx2Vec::kMaxRows));
}

}  // namespace seqboat::cpu
