// The device-grouped expert ops (MoeGroup, MoeGemm, MoeCombine) on CUDA
// against the CPU backend (testing/moe_cases.h): the grouping and the
// combine bit for bit, the experts' GEMV within float rounding of the CPU's
// GEMM on the weights CUDA stores, in fp32, bf16 and fp8, and a pair's bits
// alone equal to its bits in a large batch.
#include <vector>

#include "kernels/cuda/testing/gpu_test_util.h"
#include "kernels/cuda/testing/moe_cases.h"
#include "kernels/cuda/testing/stored_values.h"

namespace seqboat::gpu_test {
namespace {

namespace moe = parity::moe;

TEST(MoeOpsGpuTest, GroupingMatchesTheCpu) {
  Pair p;
  ASSERT_NE(p.cuda, nullptr);
  for (const moe::Routing& r : moe::kRoutings) {
    moe::ExpectGroupingMatches(*p.cpu, *p.cuda, r);
  }
}

TEST(MoeOpsGpuTest, ExpertGemvMatchesTheCpuGemm) {
  for (const auto& [weights, storage] :
       {std::pair{CudaWeights::kF32, cuda::Storage::kF32},
        std::pair{CudaWeights::kBf16, cuda::Storage::kBf16},
        std::pair{CudaWeights::kFp8, cuda::Storage::kFp8E4m3}}) {
    SCOPED_TRACE(testing::Message() << "storage " << static_cast<int>(storage));
    auto cpu = MakeCpuBackend(1);
    auto cuda = MakeCuda(weights);
    ASSERT_NE(cuda, nullptr);
    const cuda::Storage s = storage;
    moe::ExpectGemmsMatch(
        *cpu, *cuda,
        [s](Backend& be, const std::vector<float>& w, int rows, int cols) {
          return *be.UploadMatrix(parity::StoredValues(s, w, rows, cols).data(),
                                  rows, cols);
        },
        [](Backend& be, const std::vector<float>& w, int rows, int cols) {
          return *be.UploadMatrix(w.data(), rows, cols);
        },
        2e-5f);
  }
}

TEST(MoeOpsGpuTest, PairResultsDoNotDependOnTheBatch) {
  for (const CudaWeights weights :
       {CudaWeights::kF32, CudaWeights::kBf16, CudaWeights::kFp8}) {
    SCOPED_TRACE(testing::Message() << "weights " << static_cast<int>(weights));
    auto cuda = MakeCuda(weights);
    ASSERT_NE(cuda, nullptr);
    moe::ExpectPairsIndependentOfBatch(
        *cuda, [](Backend& be, const std::vector<float>& w, int rows,
                  int cols) { return *be.UploadMatrix(w.data(), rows, cols); });
  }
}

TEST(MoeOpsGpuTest, CombineMatchesTheCpuBitForBit) {
  Pair p;
  ASSERT_NE(p.cuda, nullptr);
  for (const moe::Routing& r : moe::kRoutings) {
    moe::ExpectCombineMatches(*p.cpu, *p.cuda, r);
  }
}

}  // namespace
}  // namespace seqboat::gpu_test
