// The device-grouped expert kernels (moe_kernels.cu) on the emulation
// against the CPU backend's ops (kernels/cuda/testing/moe_cases.h): the
// grouping and the combine bit for bit, the experts' GEMV within float
// rounding of the CPU GEMM on the stored weights, in fp32, bf16 and fp8, and
// a pair's bits alone equal to its bits in a large batch.
#include <vector>

#include "gtest/gtest.h"
#include "kernels/cpu/cpu_backend.h"
#include "kernels/cuda/emu/dense_emulation.h"
#include "kernels/cuda/moe_kernels.h"
#include "kernels/cuda/testing/moe_cases.h"

namespace seqboat::emu_test {
namespace {

namespace moe = parity::moe;

TEST(MoeKernelsEmuTest, GroupingMatchesTheCpu) {
  for (const moe::Routing& r : moe::kRoutings) {
    auto cpu = MakeCpuBackend(1);
    DenseEmulation emu(cuda::Storage::kBf16);
    moe::ExpectGroupingMatches(*cpu, emu, r);
  }
}

// Sums of up to a few hundred products of magnitude <= 0.5 in two summation
// orders: float rounding, far below a wrong row or pair.
TEST(MoeKernelsEmuTest, ExpertGemvMatchesTheCpuGemm) {
  for (const cuda::Storage s :
       {cuda::Storage::kF32, cuda::Storage::kBf16, cuda::Storage::kFp8E4m3}) {
    SCOPED_TRACE(testing::Message() << "storage " << static_cast<int>(s));
    auto cpu = MakeCpuBackend(1);
    DenseEmulation emu(s);
    moe::ExpectGemmsMatch(
        *cpu, emu,
        [s](Backend& be, const std::vector<float>& w, int rows, int cols) {
          return *be.UploadMatrix(StoredValues(s, w, rows, cols).data(), rows,
                                  cols);
        },
        [](Backend& be, const std::vector<float>& w, int rows, int cols) {
          return *be.UploadMatrix(w.data(), rows, cols);
        },
        2e-5f);
  }
}

TEST(MoeKernelsEmuTest, PairResultsDoNotDependOnTheBatch) {
  // The two geometries the case means to compare.
  ASSERT_EQ(cuda::MoeGemmRowsPerWarp(1, moe::kIndependentRows), 1);
  ASSERT_EQ(cuda::MoeGemmRowsPerWarp(
                MoeTileBound(moe::kBigBatch.n, moe::kBigBatch.slots,
                             moe::kBigBatch.x),
                moe::kIndependentRows),
            4);
  for (const cuda::Storage s :
       {cuda::Storage::kF32, cuda::Storage::kBf16, cuda::Storage::kFp8E4m3}) {
    SCOPED_TRACE(testing::Message() << "storage " << static_cast<int>(s));
    DenseEmulation emu(s);
    moe::ExpectPairsIndependentOfBatch(
        emu, [](Backend& be, const std::vector<float>& w, int rows, int cols) {
          return *be.UploadMatrix(w.data(), rows, cols);
        });
  }
}

TEST(MoeKernelsEmuTest, CombineMatchesTheCpuBitForBit) {
  for (const moe::Routing& r : moe::kRoutings) {
    auto cpu = MakeCpuBackend(1);
    DenseEmulation emu(cuda::Storage::kBf16);
    moe::ExpectCombineMatches(*cpu, emu, r);
  }
}

}  // namespace
}  // namespace seqboat::emu_test
