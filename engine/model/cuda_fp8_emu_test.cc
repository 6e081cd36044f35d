// The CUDA backend's fp8 weights (--cuda_weights=fp8) on whole models, on
// the CPU: its GEMV and Embed kernels run on the CUDA emulation with the
// matrices quantised as its upload quantises them (kernels/cuda/emu
// dense_emulation.h), every other op on the CPU backend. Their logits are
// measured against the fp32 CPU backend and bounded as the CPU's int8 are
// (logit_error.h); the error against bf16 weights is printed beside them.
// With fp32 weights the emulated backend (its folded pre-norms and residual
// epilogues included, scaled ones too) matches the CPU's logits to within
// float rounding. Mamba-1's scan runs on the emulation too (its decode steps
// with dt_proj folded into the decode kernel): with fp32 and bf16 weights
// the logits stay within rounding of the CPU backend's on the same weights.
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <string>

#include "engine/model/logit_error.h"
#include "gtest/gtest.h"
#include "kernels/cpu/cpu_backend.h"
#include "kernels/cuda/emu/dense_emulation.h"
#include "nlohmann/json.hpp"

namespace seqboat {
namespace {

constexpr const char* kModels[] = {"weights/models/default",
                                   "weights/models/mamba-baseline",
                                   "tests/data/tiny_hybrid"};

std::unique_ptr<Backend> Cpu(const std::string& weights) {
  CpuBackendOptions o;
  o.threads = 1;
  o.weights = weights;
  auto be = MakeCpuBackend(o);
  EXPECT_TRUE(be.ok()) << be.status();
  return *std::move(be);
}

TEST(CudaFp8EmuTest, Fp8WeightsStayCloseToFp32Logits) {
  for (const char* dir : kModels) {
    auto fp32 = Cpu("fp32");
    auto bf16 = Cpu("bf16");
    emu_test::DenseEmulation fp8(cuda::Storage::kFp8E4m3);
    const std::vector<float> want = testing_logits::Logits(dir, *fp32);
    const std::vector<float> got = testing_logits::Logits(dir, fp8);
    EXPECT_TRUE(fp8.TakeError().ok());
    testing_logits::ExpectWithinQuantisedBounds(
        std::string(dir) + " fp8 vs fp32", testing_logits::Compare(want, got));
    const testing_logits::LogitError against_bf16 =
        testing_logits::Compare(testing_logits::Logits(dir, *bf16), got);
    std::printf("%s fp8 vs bf16: logit error mean %.4g max %.4g\n", dir,
                against_bf16.mean, against_bf16.max);
    // The emulated matrices are fp8 indeed: not the fp32 logits' bits.
    EXPECT_GT(testing_logits::Compare(want, got).max, 0.0);
  }
}

// fp32 weights on the emulated GEMV, which folds the blocks' pre-norms into
// their first projections and adds their residuals in its epilogue, against
// the CPU backend running the ops in turn: the same math in another
// summation order, so within a few float roundings of the logits at every
// position (prefill at 16 rows, decode at 1), over models with every block
// kind that folds (mamba1, mamba2, attention, gdn, mlp, moe).
TEST(CudaFp8EmuTest, Fp32WeightsMatchTheCpuWithFoldedNorms) {
  for (const char* dir :
       {"tests/data/tiny_hybrid", "tests/data/tiny_gdn",
        "tests/data/tiny_qwen3_5_mtp", "weights/models/default"}) {
    auto fp32 = Cpu("fp32");
    emu_test::DenseEmulation emu(cuda::Storage::kF32);
    const std::vector<float> want = testing_logits::Logits(dir, *fp32);
    const std::vector<float> got = testing_logits::Logits(dir, emu);
    EXPECT_TRUE(emu.TakeError().ok());
    const testing_logits::LogitError e = testing_logits::Compare(want, got);
    std::printf("%s emulated fp32 vs CPU: max %.3g of largest %.3g\n", dir,
                e.max, e.largest);
    EXPECT_LE(e.max, 1e-4 * e.largest) << dir;
    EXPECT_EQ(e.argmax_agree, testing_logits::kPositions) << dir;
  }
}

// A copy of `dir` whose attention, mlp and mamba2 blocks scale their
// residual adds (config.json's residual_scale, as Granite-4.0-H's do), the
// weights linked from the original.
std::string WithResidualScale(const std::string& dir, double scale) {
  const std::string out = std::string(std::getenv("TEST_TMPDIR")) + "/" +
                          std::to_string(std::hash<std::string>()(dir));
  std::filesystem::create_directories(out);
  for (const auto& entry : std::filesystem::directory_iterator(dir)) {
    const std::string name = entry.path().filename().string();
    if (name == "config.json") continue;
    std::filesystem::remove(out + "/" + name);
    std::filesystem::create_symlink(std::filesystem::absolute(entry.path()),
                                    out + "/" + name);
  }
  std::ifstream in(dir + "/config.json");
  nlohmann::json config = nlohmann::json::parse(in);
  int scaled = 0;
  for (auto& block : config["blocks"]) {
    const std::string kind = block["kind"];
    if (kind == "attention" || kind == "mlp" || kind == "mamba2") {
      block["residual_scale"] = scale;
      ++scaled;
    }
  }
  EXPECT_GT(scaled, 0) << dir;
  std::ofstream(out + "/config.json") << config.dump();
  return out;
}

// The scaled residual add as the emulated GEMV's epilogue against the CPU's
// GEMM then fma, on whole models (prefill at 16 rows, decode at 1).
TEST(CudaFp8EmuTest, Fp32WeightsMatchTheCpuWithScaledResiduals) {
  for (const char* dir : {"tests/data/tiny_hybrid", "tests/data/tiny_gdn"}) {
    const std::string scaled = WithResidualScale(dir, 0.22);
    auto fp32 = Cpu("fp32");
    emu_test::DenseEmulation emu(cuda::Storage::kF32);
    const std::vector<float> want = testing_logits::Logits(scaled, *fp32);
    const std::vector<float> got = testing_logits::Logits(scaled, emu);
    EXPECT_TRUE(emu.TakeError().ok());
    const testing_logits::LogitError e = testing_logits::Compare(want, got);
    std::printf(
        "%s scaled 0.22, emulated fp32 vs CPU: max %.3g of largest "
        "%.3g\n",
        dir, e.max, e.largest);
    EXPECT_LE(e.max, 1e-4 * e.largest) << dir;
    EXPECT_EQ(e.argmax_agree, testing_logits::kPositions) << dir;
    // The scale took: not the unscaled model's logits.
    EXPECT_GT(
        testing_logits::Compare(testing_logits::Logits(dir, *fp32), want).max,
        1e-3)
        << dir;
  }
}

// The emulated GEMVs and scan (dt_proj folded at decode) against the CPU on
// the same weights: only the order of sums differs, which over a model's
// layers moves logits by a small fraction of the largest (bound: 1e-4 of
// it; seen: printed).
TEST(CudaFp8EmuTest, Fp32AndBf16WeightsStayWithinRoundingOfTheCpu) {
  for (const char* dir : kModels) {
    for (const std::string type : {"fp32", "bf16"}) {
      auto cpu = Cpu(type);
      emu_test::DenseEmulation emu(type == "bf16" ? cuda::Storage::kBf16
                                                  : cuda::Storage::kF32);
      const testing_logits::LogitError e = testing_logits::Compare(
          testing_logits::Logits(dir, *cpu), testing_logits::Logits(dir, emu));
      EXPECT_TRUE(emu.TakeError().ok());
      std::printf("%s %s emulated vs cpu: logit error max %.3g of %.3g\n", dir,
                  type.c_str(), e.max, e.largest);
      EXPECT_LE(e.max, 1e-4 * e.largest) << dir << " " << type;
      EXPECT_EQ(e.argmax_agree, testing_logits::kPositions) << dir << type;
    }
  }
}

}  // namespace
}  // namespace seqboat
