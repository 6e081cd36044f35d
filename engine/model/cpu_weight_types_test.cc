// The CPU backend's 16-bit and int8 weights, on whole models: the bundled
// ones and the tiny hybrid (every block kind).
//
// 16-bit: the CUDA backend defines a bf16/fp16 model as the fp32 model whose
// matrices are rounded to nearest even (routers excepted), with fp32
// activations (its decode GEMV). The CPU keeps the matrices 16-bit and widens
// them in registers, so its logits must equal, bit for bit, those of the fp32
// CPU backend given matrices rounded the same way: the stated bound is 0.
//
// int8 (weight-only, per-row scales) has no exact counterpart; its error
// against fp32 logits is measured and bounded here (figures printed).
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <numeric>
#include <string>
#include <vector>

#include "base/dtype_convert.h"
#include "engine/backend/testing/forwarding_backend.h"
#include "engine/model/model.h"
#include "gtest/gtest.h"
#include "kernels/cpu/cpu_backend.h"

namespace seqboat {
namespace {

constexpr const char* kModels[] = {"weights/models/default",
                                   "weights/models/mamba-baseline",
                                   "tests/data/tiny_hybrid"};

// The fp32 CPU backend fed matrices already rounded to a 16-bit type.
class RoundingBackend : public ForwardingBackend {
 public:
  RoundingBackend(std::unique_ptr<Backend> inner, bool bf16)
      : ForwardingBackend(std::move(inner)), bf16_(bf16) {}

  absl::StatusOr<Matrix> UploadMatrix(const float* host, int64_t rows,
                                      int64_t cols) override {
    std::vector<float> rounded(host, host + rows * cols);
    for (float& v : rounded) {
      v = bf16_ ? Bf16ToF32(F32ToBf16(v)) : F16ToF32(F32ToF16(v));
    }
    return inner().UploadMatrix(rounded.data(), rows, cols);
  }

 private:
  const bool bf16_;
};

std::unique_ptr<Backend> Cpu(const std::string& weights,
                             const std::string& isa = "auto") {
  CpuBackendOptions o;
  o.threads = 1;
  o.weights = weights;
  o.isa = isa;
  auto be = MakeCpuBackend(o);
  EXPECT_TRUE(be.ok()) << be.status();
  return *std::move(be);
}

// Logits of every position: a 16-token prefill chunk (the GEMM at n = 16),
// then 24 single-token decode steps (n = 1).
std::vector<float> Logits(const std::string& dir, Backend& backend) {
  // 16 logit rows at once: max_slots bounds them.
  auto model = Model::Load(dir, backend, {16, 32});
  EXPECT_TRUE(model.ok()) << model.status();
  if (!model.ok()) return {};
  const int v = (*model)->vocab_size();
  const int slot = *(*model)->arena().Acquire();
  std::vector<int32_t> tokens(40);
  for (int i = 0; i < 40; ++i) tokens[i] = (i * 37 + 11) % 256;
  std::vector<float> out(tokens.size() * v);
  StepRows prefill{{tokens.begin(), tokens.begin() + 16}, {{slot, 0, 16}}, {}};
  prefill.logit_rows.resize(16);
  std::iota(prefill.logit_rows.begin(), prefill.logit_rows.end(), 0);
  EXPECT_TRUE((*model)->Forward(prefill, out.data()).ok());
  for (int t = 16; t < 40; ++t) {
    const StepRows one{{tokens[t]}, {{slot, 0, 1}}, {0}};
    EXPECT_TRUE(
        (*model)->Forward(one, out.data() + static_cast<size_t>(t) * v).ok());
  }
  return out;
}

TEST(CpuWeightTypesTest, SixteenBitWeightsEqualTheFp32ModelOnRoundedMatrices) {
  for (const char* dir : kModels) {
    for (const std::string type : {"bf16", "fp16"}) {
      auto sixteen = Cpu(type);
      RoundingBackend rounded(Cpu("fp32"), type == "bf16");
      const std::vector<float> got = Logits(dir, *sixteen);
      const std::vector<float> want = Logits(dir, rounded);
      ASSERT_EQ(got.size(), want.size());
      ASSERT_FALSE(got.empty());
      size_t differ = 0;
      for (size_t i = 0; i < got.size(); ++i) differ += got[i] != want[i];
      EXPECT_EQ(differ, 0u) << dir << " " << type << ": " << differ << " of "
                            << got.size() << " logits differ";
    }
  }
}

TEST(CpuWeightTypesTest, SixteenBitMatricesTakeHalfTheMemory) {
  for (const char* dir : kModels) {
    auto fp32 = Cpu("fp32");
    auto bf16 = Cpu("bf16");
    auto int8 = Cpu("int8");
    ASSERT_TRUE(Model::Load(dir, *fp32, {2, 8}).ok());
    ASSERT_TRUE(Model::Load(dir, *bf16, {2, 8}).ok());
    ASSERT_TRUE(Model::Load(dir, *int8, {2, 8}).ok());
    // Routers, vectors (norms, biases) and int8's per-row scales stay fp32,
    // so a little over a half and a quarter on these small models.
    EXPECT_LT(bf16->WeightBytes(), 0.55 * fp32->WeightBytes()) << dir;
    EXPECT_LT(int8->WeightBytes(), 0.35 * fp32->WeightBytes()) << dir;
  }
}

// Stated bounds for int8 on these models, relative to the largest fp32
// logit: mean error under 2 %, max error under 15 % (a SeqBoat router whose
// fp32 decision flips on a near tie moves a whole position's logits), and
// the same argmax at >= 90 % of positions.
TEST(CpuWeightTypesTest, Int8StaysCloseToFp32Logits) {
  for (const char* dir : kModels) {
    auto fp32 = Cpu("fp32");
    auto int8 = Cpu("int8");
    const std::vector<float> want = Logits(dir, *fp32);
    const std::vector<float> got = Logits(dir, *int8);
    ASSERT_EQ(got.size(), want.size());
    const size_t positions = 40, v = want.size() / positions;
    double max_err = 0, max_abs = 0, sum_err = 0;
    size_t agree = 0;
    for (size_t t = 0; t < positions; ++t) {
      const float* a = want.data() + t * v;
      const float* q = got.data() + t * v;
      for (size_t j = 0; j < v; ++j) {
        max_err = std::max(max_err, double(std::fabs(a[j] - q[j])));
        max_abs = std::max(max_abs, double(std::fabs(a[j])));
        sum_err += std::fabs(a[j] - q[j]);
      }
      agree += std::max_element(a, a + v) - a == std::max_element(q, q + v) - q;
    }
    const double mean_err = sum_err / want.size();
    std::printf(
        "%s int8: logit error mean %.4g max %.4g (largest |logit| "
        "%.3g), argmax agrees at %zu/%zu positions\n",
        dir, mean_err, max_err, max_abs, agree, positions);
    EXPECT_LT(mean_err, 0.02 * max_abs) << dir;
    EXPECT_LT(max_err, 0.15 * max_abs) << dir;
    EXPECT_GE(agree, positions * 9 / 10) << dir;
  }
}

// The AVX2 path (every machine's) against the widest one here: the GEMMs
// agree bit for bit (packed_gemm_test); the recurrent ops vectorise their
// sums differently, so the logits agree to rounding.
TEST(CpuWeightTypesTest, TheInstructionSetPathsAgree) {
  for (const char* dir : kModels) {
    auto avx2 = Cpu("bf16", "avx2");
    auto best = Cpu("bf16", "auto");
    std::printf("%s: avx2 against %s\n", dir, best->DeviceName().c_str());
    const std::vector<float> a = Logits(dir, *avx2);
    const std::vector<float> b = Logits(dir, *best);
    ASSERT_EQ(a.size(), b.size());
    ASSERT_FALSE(a.empty());
    float worst = 0, largest = 0;
    for (size_t i = 0; i < a.size(); ++i) {
      worst = std::max(worst, std::fabs(a[i] - b[i]));
      largest = std::max(largest, std::fabs(a[i]));
    }
    EXPECT_LT(worst, 1e-4f * largest) << dir;
  }
}

}  // namespace
}  // namespace seqboat
