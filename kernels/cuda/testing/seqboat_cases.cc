// The SeqBoat cases the GPU test (kernels/cuda/seqboat_ops_gpu_test.cc) and
// the emulation test (kernels/cuda/emu/seqboat_kernels_emu_test.cc) both run,
// on the target each instantiates SeqBoatParityTest with.
#include "kernels/cuda/testing/seqboat_cases.h"

#include "engine/backend/seqboat_shape.h"
#include "gtest/gtest.h"

namespace seqboat::parity {
namespace {

TEST_P(SeqBoatParityTest, RealisticSoftmaxRope) {
  RunSteps(SeqBoatRealisticRun(GetParam().realistic, SeqBoatAttnFn::kSoftmax,
                               SeqBoatPos::kRopeInterleaved, 101));
}

TEST_P(SeqBoatParityTest, RealisticSoftmaxSimpleBias) {
  RunSteps(SeqBoatRealisticRun(GetParam().realistic, SeqBoatAttnFn::kSoftmax,
                               SeqBoatPos::kSimpleBias, 202));
}

TEST_P(SeqBoatParityTest, RealisticRelu2Rope) {
  RunSteps(SeqBoatRealisticRun(GetParam().realistic, SeqBoatAttnFn::kRelu2,
                               SeqBoatPos::kRopeInterleaved, 303));
}

TEST_P(SeqBoatParityTest, RealisticRelu2SimpleBias) {
  RunSteps(SeqBoatRealisticRun(GetParam().realistic, SeqBoatAttnFn::kRelu2,
                               SeqBoatPos::kSimpleBias, 404));
}

// The decode form, every attention function and positional variant.
TEST_P(SeqBoatParityTest, DecodeForm) {
  const SeqBoatAttnFn fns[] = {SeqBoatAttnFn::kSoftmax, SeqBoatAttnFn::kRelu2};
  const SeqBoatPos poss[] = {SeqBoatPos::kRopeInterleaved,
                             SeqBoatPos::kSimpleBias};
  uint32_t seed = 1001;
  for (const SeqBoatAttnFn fn : fns) {
    for (const SeqBoatPos pos : poss) {
      SCOPED_TRACE(::testing::Message() << "attn_fn " << static_cast<int>(fn)
                                        << " pos " << static_cast<int>(pos));
      RunSteps(SeqBoatDecodeFormRun(GetParam().realistic, fn, pos, seed++));
    }
  }
}

TEST_P(SeqBoatParityTest, OddSizes) {
  for (const NamedSeqBoatRun& r : SeqBoatOddSizeRuns()) {
    SCOPED_TRACE(r.name);
    RunSteps(r.run);
  }
}

TEST_P(SeqBoatParityTest, LargeWindow) { RunSteps(GetParam().large_window); }

TEST_P(SeqBoatParityTest, RouteOverManyRowsAndNone) {
  const std::unique_ptr<Backend> ref = MakeCpuBackend(1);
  const std::unique_ptr<Backend> dut = GetParam().make();
  ASSERT_NE(dut, nullptr);
  RouteOverManyRows(*ref, *dut, kSeqBoatConfTol);
}

}  // namespace
}  // namespace seqboat::parity
