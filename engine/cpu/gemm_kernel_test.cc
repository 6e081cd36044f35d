#include "engine/cpu/gemm_kernel.h"

#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "gtest/gtest.h"

namespace seqboat::cpu {
namespace {

std::vector<float> Random(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  std::vector<float> v(n);
  for (float& x : v) x = u(rng);
  return v;
}

TEST(SkinnyGemmTest, MatchesADoublePrecisionReferenceOnEveryTileShape) {
  for (int n : {1, 2, 3, 4, 5, 7, 9, 64, 67, 130}) {
    for (int m : {1, 2, 3, 4, 5, 8}) {
      for (int k : {1, 7, 8, 9, 24, 100}) {
        const int ldx = k + 3, ldy = m + 2;
        std::vector<float> x = Random(static_cast<size_t>(n) * ldx, 1 + n);
        std::vector<float> w = Random(static_cast<size_t>(m) * k, 2 + m);
        std::vector<float> bias = Random(m, 3);
        std::vector<float> y = Random(static_cast<size_t>(n) * ldy, 4);
        const std::vector<float> y0 = y;
        SkinnyGemm(x.data(), ldx, n, w.data(), m, k, bias.data(), y.data(), ldy,
                   true);
        for (int i = 0; i < n; ++i) {
          for (int j = 0; j < m; ++j) {
            double want = y0[i * ldy + j] + bias[j];
            for (int kk = 0; kk < k; ++kk)
              want += double(x[i * ldx + kk]) * w[j * k + kk];
            ASSERT_NEAR(y[i * ldy + j], want, 1e-4 * (1 + std::sqrt(k)))
                << "n=" << n << " m=" << m << " k=" << k << " at " << i << ","
                << j;
          }
          // Padding between rows is never written.
          for (int j = m; j < ldy; ++j)
            ASSERT_EQ(y[i * ldy + j], y0[i * ldy + j]);
        }
      }
    }
  }
}

// A row's result must not depend on how many rows it is computed with, nor on
// its position among them: that is what keeps a sequence's tokens the same
// whatever it is batched with.
TEST(SkinnyGemmTest, EachRowIsBitwiseIndependentOfTheBatch) {
  const int m = 37, k = 203;
  std::vector<float> w = Random(static_cast<size_t>(m) * k, 9);
  std::vector<float> probe = Random(k, 10);
  std::vector<float> alone(m);
  SkinnyGemm(probe.data(), k, 1, w.data(), m, k, nullptr, alone.data(), m,
             false);
  for (int n : {2, 3, 4, 5, 8, 63, 64, 65, 129}) {
    for (int pos : {0, n / 2, n - 1}) {
      std::vector<float> x = Random(static_cast<size_t>(n) * k, 11 + n);
      std::memcpy(x.data() + static_cast<size_t>(pos) * k, probe.data(),
                  k * sizeof(float));
      std::vector<float> y(static_cast<size_t>(n) * m);
      SkinnyGemm(x.data(), k, n, w.data(), m, k, nullptr, y.data(), m, false);
      ASSERT_EQ(0, std::memcmp(y.data() + static_cast<size_t>(pos) * m,
                               alone.data(), m * sizeof(float)))
          << "n=" << n << " pos=" << pos;
    }
  }
}

}  // namespace
}  // namespace seqboat::cpu
