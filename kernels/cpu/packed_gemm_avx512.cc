// The packed GEMM on AVX-512 (F, BW, VL, DQ): 16 lanes, one register per
// panel, 32 registers. Compiled for that target here only; PackedGemm calls
// it only where cpuid and the OS say the processor runs it.
#include <immintrin.h>

#include <algorithm>
#include <cstdint>

#include "kernels/cpu/avx512_target_begin.h"
#include "kernels/cpu/packed_gemm.h"
#include "kernels/cpu/packed_gemm_tiles.h"
#include "kernels/cpu/packed_matrix.h"

namespace seqboat::cpu {
namespace {

struct Avx512Vec {
  using Reg = __m512;
  static constexpr int kLanes = 16;
  // 8 rows x 3 panels: 24 accumulators, 3 weights, 1 broadcast.
  static constexpr int kMaxRows = 8;

  static Reg Zero() { return _mm512_setzero_ps(); }
  static Reg Set1(float v) { return _mm512_set1_ps(v); }
  static Reg Fma(Reg a, Reg b, Reg c) { return _mm512_fmadd_ps(a, b, c); }
  static Reg Mul(Reg a, Reg b) { return _mm512_mul_ps(a, b); }
  static Reg Add(Reg a, Reg b) { return _mm512_add_ps(a, b); }
  static Reg Load(const float* p) { return _mm512_loadu_ps(p); }

  static __mmask16 Mask(int live) {
    return static_cast<__mmask16>((1u << live) - 1u);
  }
  static Reg LoadPartial(const float* p, int live) {
    if (live == kLanes) return _mm512_loadu_ps(p);
    return _mm512_maskz_loadu_ps(Mask(live), p);
  }
  static void StorePartial(float* p, int live, Reg v) {
    if (live == kLanes) {
      _mm512_storeu_ps(p, v);
    } else {
      _mm512_mask_storeu_ps(p, Mask(live), v);
    }
  }

  template <WeightType T>
  static Reg Load(const typename tiles::Elem<T>::type* p) {
    if constexpr (T == WeightType::kF32) {
      return _mm512_load_ps(p);
    } else if constexpr (T == WeightType::kBf16) {
      const __m256i h = _mm256_load_si256(reinterpret_cast<const __m256i*>(p));
      return _mm512_castsi512_ps(
          _mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));
    } else if constexpr (T == WeightType::kF16) {
      return _mm512_cvtph_ps(
          _mm256_load_si256(reinterpret_cast<const __m256i*>(p)));
    } else {
      const __m128i q = _mm_load_si128(reinterpret_cast<const __m128i*>(p));
      return _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(q));
    }
  }
};

}  // namespace

void Avx512GemmBlock(const GemmBlock& b) { tiles::AnyBlock<Avx512Vec>(b); }

int Avx512TilePanels(int n) {
  return tiles::NvFor<Avx512Vec>(std::min(n, Avx512Vec::kMaxRows));
}

}  // namespace seqboat::cpu

#include "kernels/cpu/avx512_target_end.h"
