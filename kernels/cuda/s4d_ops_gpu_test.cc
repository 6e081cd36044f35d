// S4D's diagonal recurrence on CUDA equals the CPU backend's: the outputs and
// the whole state arena after each of several calls that mix decode, prefill
// and zero-length padding segments (on a slot a real segment also uses), for
// the register-resident mode counts and the global-memory fallback; and a
// recorded step replayed with new inputs and segments equals running it
// eagerly.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <utility>
#include <vector>

#include "kernels/cuda/testing/gpu_test_util.h"
#include "kernels/cuda/testing/s4d_cases.h"

namespace seqboat::gpu_test {
namespace {

// nvcc contracts the complex recurrence into FMAs the CPU rounds separately:
// up to 4.2e-6 apart on the cases' states (about 4.5, 4.8e-7 an ulp) when the
// kernel ran on the CPU with FMAs. 2e-5 leaves room for that; a wrong index or
// mode is off by O(1).
constexpr float kTol = 2e-5f;

using parity::Bound;
using parity::FixedMixedCalls;
using parity::PaddedDecodeCalls;
using parity::s4d::DeviceLayer;
using parity::s4d::DeviceStep;
using parity::s4d::Dims;
using parity::s4d::ExpectMatchOverCalls;
using parity::s4d::HostLayer;
using parity::s4d::HostStep;
using parity::s4d::MakeLayer;
using parity::s4d::MakeStep;
using parity::s4d::RunOp;
using parity::s4d::Trace;

TEST(S4dOpsGpuTest, MatchesCpuOverMixedSegments) {
  Pair p;
  ASSERT_NE(p.cuda, nullptr);
  // Realistic (d_model 1024, d_state 64 as 32 conjugate-half modes); odd
  // sizes; every register specialisation, with aligned and unaligned slots;
  // several output copies; the global-memory fallback (m = 5, m = 64).
  for (const Dims& dims :
       {Dims{1024, 32, 1, 2.0f, 0}, Dims{37, 5, 2, 1.0f, 0},
        Dims{48, 16, 2, 2.0f, 3}, Dims{70, 8, 3, 2.0f, 0},
        Dims{64, 4, 1, 1.0f, 1}, Dims{40, 64, 1, 1.0f, 0},
        Dims{768, 16, 1, 2.0f, 0, Activation::kGelu},
        Dims{50, 5, 1, 1.0f, 1, Activation::kIdentity, true}}) {
    ExpectMatchOverCalls(*p.cpu, *p.cuda, dims, FixedMixedCalls(),
                         Bound::Below(kTol));
  }
}

// A decode step padded to a bucket, recorded once and replayed with new
// inputs and a new slot assignment, equals the same step run eagerly (and the
// CPU's); the state carries across the steps.
TEST(S4dOpsGpuTest, ReplayedStepMatchesEager) {
  auto cpu = MakeCpuBackend(1);
  auto eager = MakeCuda(CudaWeights::kF32, /*graphs=*/false);
  ASSERT_NE(eager, nullptr);
  for (const Dims& dims :
       {Dims{1024, 32, 1, 2.0f, 0}, Dims{37, 5, 2, 1.0f, 0}}) {
    // A recording belongs to one model's buffers: the next layer size gets a
    // backend of its own rather than replaying the last one's graph.
    auto rec = MakeCuda(CudaWeights::kF32, /*graphs=*/true);
    ASSERT_NE(rec, nullptr);
    SCOPED_TRACE(testing::Message() << "h=" << dims.h << " m=" << dims.m);
    const HostLayer layer = MakeLayer(dims, 4, 300 + dims.h);
    const std::vector<std::vector<Segment>> calls = PaddedDecodeCalls();
    std::vector<HostStep> steps;
    for (size_t i = 0; i < calls.size(); ++i) {
      steps.push_back(
          MakeStep(layer, calls[i], 400 + 10 * static_cast<uint32_t>(i)));
    }
    Trace got[3];
    int which = 0;
    for (Backend* be : {cpu.get(), eager.get(), rec.get()}) {
      DeviceLayer l(*be, layer);
      // One set of buffers: a replay reuses the recorded addresses.
      DeviceStep s(*be, layer, 4);
      for (const HostStep& step : steps) {
        s.Load(*be, step);
        ASSERT_TRUE(be->RunCaptured(4, [&] {
                        RunOp(*be, l, s, step.segs);
                        return absl::OkStatus();
                      }).ok());
        got[which].y.push_back(s.y.Read());
        got[which].arena.push_back(l.arena.Read());
        ASSERT_TRUE(be->TakeError().ok());
      }
      ++which;
    }
    for (size_t i = 0; i < steps.size(); ++i) {
      // The same kernel on the same inputs: bit for bit.
      EXPECT_EQ(MaxAbsDiff(got[1].y[i], got[2].y[i]), 0.0f) << "step " << i;
      EXPECT_EQ(MaxAbsDiff(got[1].arena[i], got[2].arena[i]), 0.0f)
          << "step " << i;
      EXPECT_LT(MaxAbsDiff(got[0].y[i], got[2].y[i]), kTol) << "step " << i;
      EXPECT_LT(MaxAbsDiff(got[0].arena[i], got[2].arena[i]), kTol)
          << "step " << i;
    }
    EXPECT_GT(MaxAbsDiff(got[1].y[0], got[1].y[1]), 0.0f);  // inputs changed
  }
}

}  // namespace
}  // namespace seqboat::gpu_test
