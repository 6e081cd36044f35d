// The SeqBoat kernels (kernels/seqboat_kernels.cu: MD-EMA, router, working-
// memory attention, mix), run on the CUDA emulation, equal the CPU backend's
// ops over successive steps of one packed batch: decode and prefill segments
// on several slots, padding segments (len 0 on slot 0, which a real segment
// also uses), 0 %, ~50 % and 100 % active rows, both attention functions and
// both positional variants, until every FIFO has wrapped; a window whose
// scores need more than 48 KiB of shared memory (the opt-in path). After
// every op the outputs and the whole state arena (integers exact) are
// compared; the router's decisions exactly. The shapes are those of
// kernels/seqboat_ops_gpu_test.cc, with narrower values and windows where the
// emulation would be slow.
#include <cstdint>
#include <vector>

#include "engine/backend/seqboat_math.h"
#include "kernels/cuda/emu/emu_test_util.h"
#include "kernels/cuda/seqboat_kernels.h"
#include "kernels/cuda/testing/parity_util.h"
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

// The GPU test's tolerances: the per-element math is shared, but reductions
// (warp sums over lanes' shares, the CPU's sequential loops) and the CPU's
// -ffast-math build round differently; an indexing or FIFO error is O(1).
constexpr float kStateTol = 1e-5f;
constexpr float kOutTol = 1e-4f;
// conf = σ((u1 − u0)/τ) goes through expf, which the CPU backend's fast-math
// build may vectorise: conf (in [0.5, 1)) may differ in its last bit or two.
// The decisions themselves are comparisons of the same floats: exact.
constexpr float kConfTol = 2.5e-7f;

using parity::SeqBoatRun;
using parity::SeqBoatRunShape;
using parity::SeqBoatRunWith;

// The attention's bound scales with its outputs (SeqBoatTolerances): relu²
// scores are unnormalised, so outputs reach a few hundred (odd sizes), and
// the kernel's lane-partial dot products round differently from the CPU's
// sequential ones, a few ulp of the output's magnitude.
void RunSteps(const SeqBoatRun& run) {
  auto cpu = MakeCpuBackend(1);
  SeqBoatEmulation emu;
  parity::RunSeqBoatSteps(*cpu, emu, run,
                          {kStateTol, kOutTol, kConfTol,
                           /*attend_scales=*/true});
}

// The GPU test's block with narrower values and window: the emulation runs
// every thread of the attention one after another.
constexpr parity::SeqBoatRealisticSize kRealistic = {256, 16, 12, 24};

TEST(SeqBoatKernelsEmuTest, RealisticSoftmaxRope) {
  RunSteps(parity::SeqBoatRealisticRun(kRealistic, SeqBoatAttnFn::kSoftmax,
                                       SeqBoatPos::kRopeInterleaved, 101));
}

TEST(SeqBoatKernelsEmuTest, RealisticSoftmaxSimpleBias) {
  RunSteps(parity::SeqBoatRealisticRun(kRealistic, SeqBoatAttnFn::kSoftmax,
                                       SeqBoatPos::kSimpleBias, 202));
}

TEST(SeqBoatKernelsEmuTest, RealisticRelu2Rope) {
  RunSteps(parity::SeqBoatRealisticRun(kRealistic, SeqBoatAttnFn::kRelu2,
                                       SeqBoatPos::kRopeInterleaved, 303));
}

TEST(SeqBoatKernelsEmuTest, RealisticRelu2SimpleBias) {
  RunSteps(parity::SeqBoatRealisticRun(kRealistic, SeqBoatAttnFn::kRelu2,
                                       SeqBoatPos::kSimpleBias, 404));
}

// Odd sizes (parity::SeqBoatOddSizeRuns).
TEST(SeqBoatKernelsEmuTest, OddSizes) {
  for (const parity::NamedSeqBoatRun& r : parity::SeqBoatOddSizeRuns()) {
    SCOPED_TRACE(r.name);
    RunSteps(r.run);
  }
}

// A window whose scores need more than the default 48 KiB of shared memory
// (the kernel opts in to more; the emulation refuses the launch otherwise).
TEST(SeqBoatKernelsEmuTest, LargeWindow) {
  // Every token scores its whole FIFO, which the emulation runs thread by
  // thread: a few short steps keep the FIFOs far from wrapping here (the
  // shapes above wrap theirs).
  SeqBoatRun r =
      SeqBoatRunWith(SeqBoatRunShape(48, 4, 4, 6, 7000, SeqBoatAttnFn::kSoftmax,
                                     SeqBoatPos::kSimpleBias, 100),
                     /*slots=*/2, /*steps=*/4, /*max_chunk=*/6, 909);
  r.wraps = false;
  ASSERT_GT(cuda::SeqBoatAttendSharedBytes(r.shape), size_t{48 * 1024});
  RunSteps(r);
}

// More rows than one block's threads: the compaction carries its count
// across chunks; n == 0 still writes the count.
TEST(SeqBoatKernelsEmuTest, RouteOverManyRowsAndNone) {
  auto cpu = MakeCpuBackend(1);
  SeqBoatEmulation emu;
  parity::RouteOverManyRows(*cpu, emu, kConfTol);
}

}  // namespace
}  // namespace seqboat::emu_test
