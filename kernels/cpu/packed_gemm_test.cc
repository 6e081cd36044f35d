#include "kernels/cpu/packed_gemm.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "base/dtype_convert.h"
#include "gtest/gtest.h"
#include "kernels/cpu/cpu_isa.h"
#include "kernels/cpu/packed_matrix.h"

namespace seqboat::cpu {
namespace {

constexpr WeightType kTypes[] = {WeightType::kF32, WeightType::kBf16,
                                 WeightType::kF16, WeightType::kInt8};

std::vector<float> Random(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  std::vector<float> v(n);
  for (float& x : v) x = u(rng);
  return v;
}

// Every path this processor runs: AVX2 always, AVX-512 where it exists (a
// machine without it still tests AVX2, and says so).
std::vector<Isa> Paths() {
  std::vector<Isa> out = {Isa::kAvx2};
  if (DetectCpu().Has(Isa::kAvx512)) {
    out.push_back(Isa::kAvx512);
  } else {
    std::printf("no AVX-512 here: only the AVX2 path is tested\n");
  }
  return out;
}

// The matrix as the kernel must see it, widened back to fp32 row-major.
std::vector<float> Unpacked(const PackedMatrix& w) {
  std::vector<float> out(static_cast<size_t>(w.rows() * w.cols()));
  for (int64_t r = 0; r < w.rows(); ++r)
    w.ReadRow(r, 1.0f, out.data() + r * w.cols());
  return out;
}

TEST(PackedMatrixTest, StoresEachTypeAsItsRounding) {
  const std::vector<float> host = Random(37 * 19, 1);
  for (WeightType t : kTypes) {
    auto w = PackedMatrix::Pack(host.data(), 37, 19, t);
    ASSERT_TRUE(w.ok()) << w.status();
    const std::vector<float> back = Unpacked(**w);
    for (size_t i = 0; i < host.size(); ++i) {
      const float h = host[i];
      switch (t) {
        case WeightType::kF32:
          ASSERT_EQ(back[i], h);
          break;
        case WeightType::kBf16:
          ASSERT_EQ(back[i], Bf16ToF32(F32ToBf16(h)));
          break;
        case WeightType::kF16:
          ASSERT_NEAR(back[i], h, std::fabs(h) * 0x1p-11f + 0x1p-25f);
          break;
        case WeightType::kInt8: {
          const float scale = (*w)->scales()[i / 19];
          ASSERT_LE(std::fabs(back[i] - h), 0.5f * scale * 1.0001f) << i;
          break;
        }
      }
    }
  }
}

TEST(PackedMatrixTest, Int8RefusesNonFiniteWeights) {
  std::vector<float> host = Random(4 * 5, 2);
  host[7] = std::nanf("");
  auto w = PackedMatrix::Pack(host.data(), 4, 5, WeightType::kInt8);
  ASSERT_FALSE(w.ok());
  EXPECT_NE(w.status().message().find("row 1 column 2"), std::string::npos)
      << w.status();
}

TEST(PackedGemmTest, MatchesADoublePrecisionReferenceOnOddShapes) {
  for (Isa isa : Paths()) {
    for (WeightType t : kTypes) {
      for (int n : {1, 2, 3, 5, 7, 9, 13, 33, 67}) {
        for (int m : {1, 7, 17, 50, 129}) {
          for (int k : {1, 3, 17, 130}) {
            const int ldx = k + 3, ldy = m + 2;
            const std::vector<float> host = Random(size_t(m) * k, 2 + m + k);
            auto w = PackedMatrix::Pack(host.data(), m, k, t);
            ASSERT_TRUE(w.ok()) << w.status();
            const std::vector<float> wf = Unpacked(**w);
            const std::vector<float> x = Random(size_t(n) * ldx, 1 + n);
            const std::vector<float> bias = Random(m, 3);
            std::vector<float> y = Random(size_t(n) * ldy, 4);
            const std::vector<float> y0 = y;
            PackedGemm(isa, x.data(), ldx, n, **w, bias.data(), y.data(), ldy,
                       true);
            for (int i = 0; i < n; ++i) {
              for (int j = 0; j < m; ++j) {
                double want = y0[i * ldy + j] + bias[j];
                for (int kk = 0; kk < k; ++kk)
                  want += double(x[i * ldx + kk]) * wf[size_t(j) * k + kk];
                ASSERT_NEAR(y[i * ldy + j], want, 2e-5 * (2 + k))
                    << IsaName(isa) << " " << WeightTypeName(t) << " n=" << n
                    << " m=" << m << " k=" << k << " at " << i << "," << j;
              }
              // Padding between rows is never written.
              for (int j = m; j < ldy; ++j)
                ASSERT_EQ(y[i * ldy + j], y0[i * ldy + j]);
            }
          }
        }
      }
    }
  }
}

// A row's result must not depend on how many rows it is computed with, nor on
// its position among them, nor on the instruction set: bitwise.
TEST(PackedGemmTest, EachRowIsBitwiseIndependentOfTheBatchAndThePath) {
  const int m = 77, k = 203;
  const std::vector<float> host = Random(size_t(m) * k, 9);
  const std::vector<float> probe = Random(k, 10);
  const std::vector<float> bias = Random(m, 12);
  for (WeightType t : kTypes) {
    auto w = PackedMatrix::Pack(host.data(), m, k, t);
    ASSERT_TRUE(w.ok());
    std::vector<float> alone(m);
    PackedGemm(Isa::kAvx2, probe.data(), k, 1, **w, bias.data(), alone.data(),
               m, false);
    for (Isa isa : Paths()) {
      for (int n : {1, 2, 3, 5, 6, 7, 8, 9, 17, 63, 64, 65, 129}) {
        for (int pos : {0, n / 2, n - 1}) {
          std::vector<float> x = Random(size_t(n) * k, 11 + n);
          std::memcpy(x.data() + size_t(pos) * k, probe.data(),
                      k * sizeof(float));
          std::vector<float> y(size_t(n) * m);
          PackedGemm(isa, x.data(), k, n, **w, bias.data(), y.data(), m, false);
          ASSERT_EQ(0, std::memcmp(y.data() + size_t(pos) * m, alone.data(),
                                   m * sizeof(float)))
              << IsaName(isa) << " " << WeightTypeName(t) << " n=" << n
              << " pos=" << pos;
        }
      }
    }
  }
}

// Large enough that the threads split the panels and the rows come in
// blocks: the same answer as one thread would give, bit for bit.
TEST(PackedGemmTest, ThreadedLargeShapesAgreeWithTheReferenceChain) {
  const int n = 300, m = 700, k = 520;
  const std::vector<float> host = Random(size_t(m) * k, 21);
  const std::vector<float> x = Random(size_t(n) * k, 22);
  for (Isa isa : Paths()) {
    auto w = PackedMatrix::Pack(host.data(), m, k, WeightType::kBf16);
    ASSERT_TRUE(w.ok());
    const std::vector<float> wf = Unpacked(**w);
    std::vector<float> y(size_t(n) * m);
    PackedGemm(isa, x.data(), k, n, **w, nullptr, y.data(), m, false);
    for (int i = 0; i < n; i += 7) {
      for (int j = 0; j < m; ++j) {
        // The kernel's exact order: fma chains over blocks of 256, summed.
        float total = 0.0f;
        for (int k0 = 0; k0 < k; k0 += 256) {
          float chain = 0.0f;
          for (int kk = k0; kk < std::min(k, k0 + 256); ++kk)
            chain =
                std::fma(x[size_t(i) * k + kk], wf[size_t(j) * k + kk], chain);
          total = k0 == 0 ? chain : total + chain;
        }
        ASSERT_EQ(y[size_t(i) * m + j], total) << i << "," << j;
      }
    }
  }
}

TEST(CpuIsaTest, ChoosesAndRefusesByName) {
  CpuFeatures none;
  EXPECT_EQ(ChooseIsa("avx9", DetectCpu()).status().code(),
            absl::StatusCode::kInvalidArgument);
  auto missing = ChooseIsa("avx512", none);
  ASSERT_EQ(missing.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(missing.status().message().find("avx512"), std::string::npos);
  const CpuFeatures here = DetectCpu();
  std::printf("%s\n", here.Describe().c_str());
  ASSERT_TRUE(here.Has(Isa::kAvx2));
  EXPECT_EQ(*ChooseIsa("auto", here), here.Best());
  EXPECT_EQ(*ChooseIsa("avx2", here), Isa::kAvx2);
}

}  // namespace
}  // namespace seqboat::cpu
