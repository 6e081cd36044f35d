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
  NormParams norm;
  norm.x = x.data();
  norm.ldx = d;
  norm.n = n;
  norm.d = d;
  norm.w = w.data();
  norm.b = b.data();
  norm.eps = 1e-5f;
  norm.out = out.data();
  norm.ldo = d;
  be->LayerNorm(norm);
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
  GemmParams m2;
  m2.x = x.data();
  m2.ldx = 2;
  m2.n = 2;
  m2.w = m;
  m2.bias = bias.data();
  m2.y = y.data();
  m2.ldy = 3;
  m2.accumulate = true;
  be->Gemm(m2);
  const float want[6] = {1 + 10 - 1, 1 + 20 - 1, 1 + 30 - 1,
                         1 + 10 + 3, 1 + 20 + 8, 1 + 30 + 13};
  for (int i = 0; i < 6; ++i) EXPECT_FLOAT_EQ(y[i], want[i]) << i;
}

TEST(DenseOpsTest, RmsNormAndGather) {
  auto be = MakeCpuBackend();
  std::vector<float> x = {3, 4, 0, 0, 1, 1}, out(6), g(4);
  NormParams norm2;
  norm2.x = x.data();
  norm2.ldx = 2;
  norm2.n = 3;
  norm2.d = 2;
  norm2.w = nullptr;
  norm2.eps = 0.0f;
  norm2.out = out.data();
  norm2.ldo = 2;
  be->RmsNorm(norm2);
  EXPECT_NEAR(out[0], 3 / std::sqrt(12.5f), 1e-6);
  EXPECT_NEAR(out[5], 1.0f, 1e-6);
  const int32_t rows[2] = {2, 0};
  GatherRowsParams gather;
  gather.x = x.data();
  gather.d = 2;
  gather.rows = rows;
  gather.m = 2;
  gather.out = g.data();
  be->GatherRows(gather);
  EXPECT_EQ(g, (std::vector<float>{1, 1, 3, 4}));
}

// Rows in groups: two heads of width 2 in each of two rows of width 6
// (columns 1-2 and 3-4), in place; columns 0 and 5 stay.
TEST(DenseOpsTest, RmsNormStridedTouchesOnlyItsColumnSlice) {
  auto be = MakeCpuBackend();
  // Two rows of width 4; normalise columns [1, 3) in place with a weight.
  std::vector<float> x = {9, 3, 4, 9, 7, 0, 2, 7};
  const float w[2] = {2.0f, 1.0f};
  NormParams norm3;
  norm3.x = x.data() + 1;
  norm3.ldx = 4;
  norm3.n = 2;
  norm3.d = 2;
  norm3.w = w;
  norm3.eps = 0.0f;
  norm3.out = x.data() + 1;
  norm3.ldo = 4;
  be->RmsNorm(norm3);
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
