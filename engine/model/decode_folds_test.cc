// The folds a layer asks its backend for: Mamba-1's and Gated DeltaNet's
// depthwise conv rides on the input projection's GEMM (GemmParams::conv), so
// a backend that runs it in the GEMM's epilogue (CUDA's decode GEMV) spends
// no launch on it, and no layer runs the conv op on its own.
#include <cstring>
#include <numeric>
#include <vector>

#include "engine/backend/testing/forwarding_backend.h"
#include "engine/model/model.h"
#include "gtest/gtest.h"
#include "kernels/cpu/cpu_backend.h"

namespace seqboat {
namespace {

class CountingBackend final : public ForwardingBackend {
 public:
  CountingBackend() : ForwardingBackend(MakeCpuBackend()) {}
  void Gemm(const GemmParams& p) override {
    if (p.conv.e > 0) ++folded_convs;
    ForwardingBackend::Gemm(p);
  }
  void MambaConv(const MambaConvParams& p) override {
    ++conv_ops;
    ForwardingBackend::MambaConv(p);
  }
  int folded_convs = 0, conv_ops = 0;
};

struct Case {
  const char* dir;
  int conv_layers;  // Mamba-1 and GDN blocks
};

class DecodeFoldsTest : public testing::TestWithParam<Case> {};

TEST_P(DecodeFoldsTest, EveryConvIsFoldedIntoItsInputProjection) {
  CountingBackend be;
  auto model = Model::Load(GetParam().dir, be, {4, 16, std::vector<int>{}});
  ASSERT_TRUE(model.ok()) << model.status();
  const int a = *(*model)->arena().Acquire(), b = *(*model)->arena().Acquire();
  std::vector<float> logits(2 * static_cast<size_t>((*model)->vocab_size()));
  // A prefill step, then a decode step of two rows.
  const StepRows prefill{{5, 6, 7, 8, 9}, {{a, 0, 5}}, {4}};
  ASSERT_TRUE((*model)->Forward(prefill, logits.data()).ok());
  EXPECT_EQ(be.folded_convs, GetParam().conv_layers);
  const StepRows decode{{10, 11}, {{a, 0, 1}, {b, 1, 1}}, {0, 1}};
  ASSERT_TRUE((*model)->Forward(decode, logits.data()).ok());
  EXPECT_EQ(be.folded_convs, 2 * GetParam().conv_layers);
  EXPECT_EQ(be.conv_ops, 0);
}

INSTANTIATE_TEST_SUITE_P(Models, DecodeFoldsTest,
                         testing::Values(Case{"tests/data/tiny_mamba", 2},
                                         Case{"tests/data/tiny_gdn", 2}));

}  // namespace
}  // namespace seqboat
