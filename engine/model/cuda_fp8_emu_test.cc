// The CUDA backend's fp8 weights (--cuda_weights=fp8) on whole models, on
// the CPU: its GEMV and Embed kernels run on the CUDA emulation with the
// matrices quantised as its upload quantises them (kernels/cuda/emu
// dense_emulation.h), every other op on the CPU backend. Their logits are
// measured against the fp32 CPU backend and bounded as the CPU's int8 are
// (logit_error.h); the error against bf16 weights is printed beside them.
#include <string>

#include "engine/model/logit_error.h"
#include "gtest/gtest.h"
#include "kernels/cpu/cpu_backend.h"
#include "kernels/cuda/emu/dense_emulation.h"

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

// fp32 weights on the emulation: the GEMV's summation order is the CPU
// GEMM's only up to rounding, so the logits agree closely, not bit for bit;
// the Mamba-1 model's decode steps take the GEMV with the folded norm and
// conv, its prefill chunk the GEMV then the conv op.
TEST(CudaFp8EmuTest, Fp32EmulationStaysWithinRoundingOfTheCpu) {
  for (const char* dir : kModels) {
    auto fp32 = Cpu("fp32");
    emu_test::DenseEmulation emu(cuda::Storage::kF32);
    const testing_logits::LogitError e = testing_logits::Compare(
        testing_logits::Logits(dir, *fp32), testing_logits::Logits(dir, emu));
    EXPECT_TRUE(emu.TakeError().ok());
    std::printf(
        "%s emulated fp32 vs CPU fp32: logit error mean %.4g max %.4g\n", dir,
        e.mean, e.max);
    EXPECT_LT(e.max, 1e-3 * e.largest) << dir;
    EXPECT_EQ(e.argmax_agree, testing_logits::kPositions) << dir;
  }
}

}  // namespace
}  // namespace seqboat
