// The SeqBoat ops on CUDA equal the CPU backend's over many successive steps
// of one packed batch: decode and prefill segments on several slots, padding
// segments (len 0 on slot 0, which a real segment also uses, as the model
// pads), 0 %, ~50 % and 100 % active rows, both attention functions and both
// positional variants, until every FIFO has wrapped. After every op the
// outputs (1e-4, relative to the largest output) and the whole state arena
// (floats 1e-5, integers exact) are compared; the router's decisions exactly.
#include <string>

#include "kernels/cuda/testing/gpu_test_util.h"
#include "kernels/cuda/testing/parity_util.h"
#include "kernels/cuda/testing/seqboat_cases.h"

namespace seqboat::gpu_test {
namespace {

constexpr float kStateTol = 1e-5f;
constexpr float kOutTol = 1e-4f;
// conf = σ((u1 − u0)/τ) goes through expf, which CUDA computes within 2 ulp
// of libm's: conf (in [0.5, 1)) may differ in its last bit or two. The
// decisions themselves are comparisons of the same floats: exact.
constexpr float kConfTol = 2.5e-7f;

using parity::SeqBoatRun;
using parity::SeqBoatRunShape;
using parity::SeqBoatRunWith;

// The attention's bound scales with its outputs, as on the emulation: relu²
// scores are unnormalised (outputs of a few hundred at odd sizes), and the
// kernel's lane-partial dot products round differently from the CPU's
// sequential ones (seen on an H200: 1.4e-4 at d 70, w 1, relu², RoPE).
void RunSteps(const SeqBoatRun& run) {
  Pair p;
  ASSERT_NE(p.cuda, nullptr);
  parity::RunSeqBoatSteps(*p.cpu, *p.cuda, run,
                          {kStateTol, kOutTol, kConfTol,
                           /*attend_scales=*/true});
}

// A trained block's sizes.
constexpr parity::SeqBoatRealisticSize kRealistic = {1024, 64, 48, 80};

TEST(SeqBoatOpsGpuTest, RealisticSoftmaxRope) {
  RunSteps(parity::SeqBoatRealisticRun(kRealistic, SeqBoatAttnFn::kSoftmax,
                                       SeqBoatPos::kRopeInterleaved, 101));
}

TEST(SeqBoatOpsGpuTest, RealisticSoftmaxSimpleBias) {
  RunSteps(parity::SeqBoatRealisticRun(kRealistic, SeqBoatAttnFn::kSoftmax,
                                       SeqBoatPos::kSimpleBias, 202));
}

TEST(SeqBoatOpsGpuTest, RealisticRelu2Rope) {
  RunSteps(parity::SeqBoatRealisticRun(kRealistic, SeqBoatAttnFn::kRelu2,
                                       SeqBoatPos::kRopeInterleaved, 303));
}

TEST(SeqBoatOpsGpuTest, RealisticRelu2SimpleBias) {
  RunSteps(parity::SeqBoatRealisticRun(kRealistic, SeqBoatAttnFn::kRelu2,
                                       SeqBoatPos::kSimpleBias, 404));
}

// Odd sizes (parity::SeqBoatOddSizeRuns).
TEST(SeqBoatOpsGpuTest, OddSizes) {
  for (const parity::NamedSeqBoatRun& r : parity::SeqBoatOddSizeRuns()) {
    SCOPED_TRACE(r.name);
    RunSteps(r.run);
  }
}

// A window whose scores need more than the default 48 KiB of shared memory
// (the kernel opts in to more), prefill chunks longer than the window so the
// FIFO wraps inside a chunk, and steps of thousands of rows for the router.
TEST(SeqBoatOpsGpuTest, LargeWindow) {
  SeqBoatRun r =
      SeqBoatRunWith(SeqBoatRunShape(48, 4, 4, 6, 7000, SeqBoatAttnFn::kSoftmax,
                                     SeqBoatPos::kSimpleBias, 100),
                     /*slots=*/1, /*steps=*/4, /*max_chunk=*/2, 909);
  r.long_chunks = true;
  RunSteps(r);
}
// The load-time check agrees with what the kernel can launch: LargeWindow's
// shape passes, a window beyond any GPU's shared memory is refused by name.
TEST(SeqBoatOpsGpuTest, CheckSeqBoatRefusesWindowsBeyondSharedMemory) {
  Pair p;
  ASSERT_NE(p.cuda, nullptr);
  const SeqBoatShape fits =
      SeqBoatRunShape(48, 4, 4, 6, 7000, SeqBoatAttnFn::kSoftmax,
                      SeqBoatPos::kSimpleBias, 100)
          .shape;
  EXPECT_TRUE(p.cuda->CheckSeqBoat(fits).ok());
  SeqBoatShape wide = fits;
  wide.w = 1 << 20;
  const absl::Status s = p.cuda->CheckSeqBoat(wide);
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(s.message().find("window 1048576"), std::string::npos) << s;
  EXPECT_TRUE(p.cpu->CheckSeqBoat(wide).ok());
}

// More rows than one block's threads: the compaction carries its count
// across chunks; n == 0 still writes the count.
TEST(SeqBoatOpsGpuTest, RouteOverManyRowsAndNone) {
  Pair p;
  ASSERT_NE(p.cuda, nullptr);
  parity::RouteOverManyRows(*p.cpu, *p.cuda, kConfTol);
}

}  // namespace
}  // namespace seqboat::gpu_test
