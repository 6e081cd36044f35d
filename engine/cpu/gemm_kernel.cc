#include "engine/cpu/gemm_kernel.h"

#include <immintrin.h>

#include <algorithm>

#include "engine/cpu/parallel.h"

namespace seqboat::cpu {
namespace {

// Rows of x handled per pass over a block of weights: x[64, k] stays in L2.
constexpr int kRowBlock = 64;
// A micro-tile is kW weight rows x kR rows of x: 12 accumulators, 3 weight
// vectors and one x vector fill the 16 ymm registers, and each 8-wide step
// does 12 FMAs for 7 loads.
constexpr int kW = 3;
constexpr int kR = 4;

inline float Hsum(__m256 v) {
  const __m128 lo = _mm256_castps256_ps128(v);
  const __m128 hi = _mm256_extractf128_ps(v, 1);
  __m128 s = _mm_add_ps(lo, hi);           // lanes i + (i+4)
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));  // (0+2), (1+3)
  s = _mm_add_ss(s, _mm_movehdup_ps(s));   // ((0+2)+(1+3))
  return _mm_cvtss_f32(s);
}

inline float Tail(const float* x, const float* w, int k8, int k) {
  float t = 0.0f;
  for (int kk = k8; kk < k; ++kk) t += x[kk] * w[kk];
  return t;
}

inline void Store(float* y, float v, const float* bias, int j,
                  bool accumulate) {
  if (bias != nullptr) v += bias[j];
  *y = accumulate ? *y + v : v;
}

// R rows of x against W weight rows, R in 1..kR, W in 1..kW.
template <int R, int W>
inline void MicroTile(const float* x, int ldx, const float* w, int k, int j,
                      const float* bias, float* y, int ldy, bool accumulate) {
  __m256 acc[R][W];
  for (int r = 0; r < R; ++r) {
    for (int c = 0; c < W; ++c) acc[r][c] = _mm256_setzero_ps();
  }
  const int k8 = k & ~7;
  for (int kk = 0; kk < k8; kk += 8) {
    __m256 wv[W];
    for (int c = 0; c < W; ++c)
      wv[c] = _mm256_loadu_ps(w + static_cast<int64_t>(c) * k + kk);
    for (int r = 0; r < R; ++r) {
      const __m256 xv = _mm256_loadu_ps(x + static_cast<int64_t>(r) * ldx + kk);
      for (int c = 0; c < W; ++c)
        acc[r][c] = _mm256_fmadd_ps(xv, wv[c], acc[r][c]);
    }
  }
  for (int r = 0; r < R; ++r) {
    for (int c = 0; c < W; ++c) {
      const float v =
          Hsum(acc[r][c]) + Tail(x + static_cast<int64_t>(r) * ldx,
                                 w + static_cast<int64_t>(c) * k, k8, k);
      Store(y + static_cast<int64_t>(r) * ldy + j + c, v, bias, j + c,
            accumulate);
    }
  }
}

template <int W>
void RowsAgainstWeights(const float* x, int ldx, int rows, const float* w,
                        int k, int j, const float* bias, float* y, int ldy,
                        bool accumulate) {
  int i = 0;
  for (; i + kR <= rows; i += kR) {
    MicroTile<kR, W>(x + static_cast<int64_t>(i) * ldx, ldx, w, k, j, bias,
                     y + static_cast<int64_t>(i) * ldy, ldy, accumulate);
  }
  const float* xi = x + static_cast<int64_t>(i) * ldx;
  float* yi = y + static_cast<int64_t>(i) * ldy;
  switch (rows - i) {
    case 3:
      MicroTile<3, W>(xi, ldx, w, k, j, bias, yi, ldy, accumulate);
      break;
    case 2:
      MicroTile<2, W>(xi, ldx, w, k, j, bias, yi, ldy, accumulate);
      break;
    case 1:
      MicroTile<1, W>(xi, ldx, w, k, j, bias, yi, ldy, accumulate);
      break;
    default:
      break;
  }
}

}  // namespace

void SkinnyGemm(const float* x, int ldx, int n, const float* w, int m, int k,
                const float* bias, float* y, int ldy, bool accumulate) {
  const int blocks = (m + kW - 1) / kW;
  for (int i0 = 0; i0 < n; i0 += kRowBlock) {
    const int rows = std::min(kRowBlock, n - i0);
    const float* xb = x + static_cast<int64_t>(i0) * ldx;
    float* yb = y + static_cast<int64_t>(i0) * ldy;
#pragma omp parallel for schedule( \
    static) if (WorthThreads(int64_t{rows} * m * k))
    for (int b = 0; b < blocks; ++b) {
      const int j = b * kW;
      const float* wb = w + static_cast<int64_t>(j) * k;
      switch (std::min(kW, m - j)) {
        case 3:
          RowsAgainstWeights<3>(xb, ldx, rows, wb, k, j, bias, yb, ldy,
                                accumulate);
          break;
        case 2:
          RowsAgainstWeights<2>(xb, ldx, rows, wb, k, j, bias, yb, ldy,
                                accumulate);
          break;
        default:
          RowsAgainstWeights<1>(xb, ldx, rows, wb, k, j, bias, yb, ldy,
                                accumulate);
          break;
      }
    }
  }
}

}  // namespace seqboat::cpu
