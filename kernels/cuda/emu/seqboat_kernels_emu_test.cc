// The SeqBoat kernels (kernels/seqboat_kernels.cu: MD-EMA, router, working-
// memory attention, mix), run on the CUDA emulation, equal the CPU backend's
// ops over successive steps of one packed batch: decode and prefill segments
// on several slots, padding segments (len 0 on slot 0, which a real segment
// also uses), 0 %, ~50 % and 100 % active rows, both attention functions and
// both positional variants, until every FIFO has wrapped; a window whose
// scores need more than 48 KiB of shared memory (the opt-in path). After
// every op the outputs and the whole state arena (integers exact) are
// compared; the router's decisions exactly. The cases are
// kernels/cuda/testing/seqboat_cases.cc, which the GPU test runs too; here
// with narrower values and windows where the emulation would be slow.
#include <cstdint>
#include <memory>
#include <vector>

#include "engine/backend/seqboat_math.h"
#include "kernels/cuda/emu/emu_test_util.h"
#include "kernels/cuda/seqboat_kernels.h"
#include "kernels/cuda/testing/seqboat_cases.h"

namespace seqboat::emu_test {
namespace {

// kernels/seqboat_ops.cc's launches on host memory: the "staged" copies are
// the host arrays themselves.
class SeqBoatEmulation : public EmulatedBackend {
 public:
  void SeqBoatEma(const SeqBoatEmaParams& p) override {
    if (p.nsegs <= 0) return;
    cuda::LaunchSeqBoatEma(p, nullptr);
  }
  void SeqBoatRoute(const SeqBoatRouteParams& p) override {
    cuda::LaunchSeqBoatRoute(p, nullptr);
  }
  void SeqBoatAttend(const SeqBoatAttendParams& p) override {
    if (p.nsegs <= 0) return;
    const std::vector<double> inv_freq = op_math::SeqBoatRopeInvFreq(p.shape);
    cuda::LaunchSeqBoatAttend(p, inv_freq.empty() ? nullptr : inv_freq.data(),
                              nullptr);
  }
  void SeqBoatMix(const SeqBoatMixParams& p) override {
    cuda::LaunchSeqBoatMix(p, nullptr);
  }
};

using parity::SeqBoatParityTest;
using parity::SeqBoatRun;

// The large window (more than 48 KiB of scores: the emulation refuses the
// launch unless the kernel opts in). Every token scores its whole FIFO,
// which the emulation runs thread by thread: a few short steps keep the
// FIFOs far from wrapping here (the other cases wrap theirs).
SeqBoatRun LargeWindowRun() {
  SeqBoatRun r = parity::SeqBoatLargeWindowRun(/*slots=*/2, /*max_chunk=*/6);
  r.wraps = false;
  return r;
}

INSTANTIATE_TEST_SUITE_P(
    SeqBoatKernelsEmuTest, SeqBoatParityTest,
    testing::Values(parity::SeqBoatTarget{
        "Emulation",
        [] { return std::make_unique<SeqBoatEmulation>(); },
        // The GPU test's block with narrower values and window: the
        // emulation runs every thread of the attention one after another.
        {/*v=*/256, /*w=*/16, /*rel_pos_max=*/12, /*max_chunk=*/24},
        LargeWindowRun()}),
    parity::SeqBoatTargetName);

// LargeWindow's run does take the opt-in path.
TEST(SeqBoatKernelsEmuTest, LargeWindowNeedsMoreThanDefaultSharedMemory) {
  EXPECT_GT(cuda::SeqBoatAttendSharedBytes(LargeWindowRun().shape),
            size_t{48 * 1024});
}

}  // namespace
}  // namespace seqboat::emu_test
