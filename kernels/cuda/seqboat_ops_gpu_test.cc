// The SeqBoat ops on CUDA equal the CPU backend's over many successive steps
// of one packed batch: decode and prefill segments on several slots, padding
// segments (len 0 on slot 0, which a real segment also uses, as the model
// pads), 0 %, ~50 % and 100 % active rows, both attention functions and both
// positional variants, until every FIFO has wrapped. After every op the
// outputs (1e-4, relative to the largest output) and the whole state arena
// (floats 1e-5, integers exact) are compared; the router's decisions exactly.
// The cases are kernels/cuda/testing/seqboat_cases.cc, which the emulation
// test runs too.
#include <string>

#include "kernels/cuda/testing/gpu_test_util.h"
#include "kernels/cuda/testing/seqboat_cases.h"

namespace seqboat::gpu_test {
namespace {

using parity::SeqBoatParityTest;
using parity::SeqBoatRun;

// The large window with prefill chunks longer than the window, so the FIFO
// wraps inside a chunk, and steps of thousands of rows for the router.
SeqBoatRun LargeWindowRun() {
  SeqBoatRun r = parity::SeqBoatLargeWindowRun(/*slots=*/1, /*max_chunk=*/2);
  r.long_chunks = true;
  return r;
}

INSTANTIATE_TEST_SUITE_P(SeqBoatOpsGpuTest, SeqBoatParityTest,
                         testing::Values(parity::SeqBoatTarget{
                             "Cuda",
                             [] { return MakeCuda(); },
                             // A trained block's sizes.
                             {/*v=*/1024, /*w=*/64, /*rel_pos_max=*/48,
                              /*max_chunk=*/80},
                             LargeWindowRun()}),
                         parity::SeqBoatTargetName);

// The load-time check agrees with what the kernel can launch: LargeWindow's
// shape passes, a window beyond any GPU's shared memory is refused by name.
TEST(SeqBoatOpsGpuTest, CheckSeqBoatRefusesWindowsBeyondSharedMemory) {
  Pair p;
  ASSERT_NE(p.cuda, nullptr);
  const SeqBoatShape fits = LargeWindowRun().shape;
  EXPECT_TRUE(p.cuda->CheckSeqBoat(fits).ok());
  SeqBoatShape wide = fits;
  wide.w = 1 << 20;
  const absl::Status s = p.cuda->CheckSeqBoat(wide);
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(s.message().find("window 1048576"), std::string::npos) << s;
  EXPECT_TRUE(p.cpu->CheckSeqBoat(wide).ok());
}

}  // namespace
}  // namespace seqboat::gpu_test
