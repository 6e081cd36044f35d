#include <cmath>
#include <vector>

#include "gtest/gtest.h"
#include "kernels/cpu/cpu_backend.h"

namespace seqboat {
namespace {

TEST(DenseOpsTest, LayerNormMatchesTheDefinition) {
  auto be = MakeCpuBackend();
  const int n = 3, d = 5;
  std::vector<float> x = {1, 2, 3, 4, 5, -1, 0, 1, 0, -1, 10, 10, 10, 10, 11};
  std::vector<float> w = {1, 2, 1, 2, 1}, b = {0, 0, 1, 0, 0}, out(n * d);
  be->LayerNorm(x.data(), n, d, w.data(), b.data(), 1e-5f, out.data());
  for (int i = 0; i < n; ++i) {
    double mean = 0, var = 0;
    for (int j = 0; j < d; ++j) mean += x[i * d + j] / d;
    for (int j = 0; j < d; ++j)
      var += (x[i * d + j] - mean) * (x[i * d + j] - mean) / d;
    for (int j = 0; j < d; ++j) {
      const double want =
          (x[i * d + j] - mean) / std::sqrt(var + 1e-5) * w[j] + b[j];
      EXPECT_NEAR(out[i * d + j], want, 1e-5) << i << "," << j;
    }
  }
}

TEST(DenseOpsTest, GemmAddsBiasAndAccumulates) {
  auto be = MakeCpuBackend();
  std::vector<float> w = {1, 2, 3, 4, 5, 6};  // [3 out, 2 in]
  auto uploaded = be->UploadMatrix(w.data(), 3, 2);
  ASSERT_TRUE(uploaded.ok()) << uploaded.status();
  const Matrix& m = *uploaded;
  std::vector<float> x = {1, -1, 2, 0.5f}, bias = {10, 20, 30}, y(6, 1.0f);
  be->Gemm(x.data(), 2, 2, m, bias.data(), y.data(), 3, /*accumulate=*/true);
  const float want[6] = {1 + 10 - 1, 1 + 20 - 1, 1 + 30 - 1,
                         1 + 10 + 3, 1 + 20 + 8, 1 + 30 + 13};
  for (int i = 0; i < 6; ++i) EXPECT_FLOAT_EQ(y[i], want[i]) << i;
}

TEST(DenseOpsTest, RmsNormAndGather) {
  auto be = MakeCpuBackend();
  std::vector<float> x = {3, 4, 0, 0, 1, 1}, out(6), g(4);
  be->RmsNorm(x.data(), 3, 2, nullptr, 0.0f, out.data());
  EXPECT_NEAR(out[0], 3 / std::sqrt(12.5f), 1e-6);
  EXPECT_NEAR(out[5], 1.0f, 1e-6);
  const int32_t rows[2] = {2, 0};
  be->GatherRows(x.data(), 2, rows, 2, g.data());
  EXPECT_EQ(g, (std::vector<float>{1, 1, 3, 4}));
}

TEST(DenseOpsTest, RmsNormStridedTouchesOnlyItsColumnSlice) {
  auto be = MakeCpuBackend();
  // Two rows of width 4; normalise columns [1, 3) in place with a weight.
  std::vector<float> x = {9, 3, 4, 9, 7, 0, 2, 7};
  const float w[2] = {2.0f, 1.0f};
  be->RmsNormStrided(x.data() + 1, 4, 2, 2, w, 0.0f, x.data() + 1, 4);
  EXPECT_NEAR(x[1], 2 * 3 / std::sqrt(12.5f), 1e-6);
  EXPECT_NEAR(x[2], 4 / std::sqrt(12.5f), 1e-6);
  EXPECT_NEAR(x[5], 0.0f, 1e-6);
  EXPECT_NEAR(x[6], 2 / std::sqrt(2.0f), 1e-6);
  EXPECT_EQ(x[0], 9);
  EXPECT_EQ(x[3], 9);
  EXPECT_EQ(x[4], 7);
  EXPECT_EQ(x[7], 7);
}

}  // namespace
}  // namespace seqboat
