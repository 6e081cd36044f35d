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
#include "engine/model/logit_error.h"
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

using testing_logits::Logits;

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

// int8 within the stated bounds of logit_error.h on these models.
TEST(CpuWeightTypesTest, Int8StaysCloseToFp32Logits) {
  for (const char* dir : kModels) {
    auto fp32 = Cpu("fp32");
    auto int8 = Cpu("int8");
    testing_logits::ExpectWithinQuantisedBounds(
        std::string(dir) + " int8",
        testing_logits::Compare(Logits(dir, *fp32), Logits(dir, *int8)));
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
