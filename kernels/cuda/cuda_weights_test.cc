// --cuda_weights names, parsed without a device: fp8 among them, an unknown
// name refused with the accepted ones listed.
#include "gtest/gtest.h"
#include "kernels/cuda/cuda_backend.h"

namespace seqboat {
namespace {

TEST(CudaWeightsTest, EveryNameParses) {
  EXPECT_EQ(*ParseCudaWeights("bf16"), CudaWeights::kBf16);
  EXPECT_EQ(*ParseCudaWeights("fp16"), CudaWeights::kF16);
  EXPECT_EQ(*ParseCudaWeights("f16"), CudaWeights::kF16);
  EXPECT_EQ(*ParseCudaWeights("fp32"), CudaWeights::kF32);
  EXPECT_EQ(*ParseCudaWeights("f32"), CudaWeights::kF32);
  EXPECT_EQ(*ParseCudaWeights("fp8"), CudaWeights::kFp8);
}

TEST(CudaWeightsTest, UnknownNameListsTheKnownOnes) {
  auto w = ParseCudaWeights("int4");
  ASSERT_FALSE(w.ok());
  EXPECT_EQ(w.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(w.status().message().find("'int4'"), std::string::npos);
  EXPECT_NE(w.status().message().find("fp8"), std::string::npos);
}

}  // namespace
}  // namespace seqboat
