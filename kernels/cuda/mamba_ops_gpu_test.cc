// Mamba-1's conv and scan on CUDA equal the CPU backend's: the outputs and the
// whole state arena after each of several calls that mix decode, prefill and
// zero-length padding segments (on a slot a real segment also uses), for the
// register-resident sizes and the global-memory fallbacks; decode after
// prefill (the decode scan); and a recorded decode step replayed with new
// inputs and segments equals running it eagerly.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <utility>
#include <vector>

#include "kernels/cuda/testing/gpu_test_util.h"
#include "kernels/cuda/testing/mamba_cases.h"

namespace seqboat::gpu_test {
namespace {

constexpr float kTol = 1e-5f;

using parity::Bound;
using parity::FixedMixedCalls;
using parity::PaddedDecodeCalls;
using parity::mamba::DeviceLayer;
using parity::mamba::DeviceStep;
using parity::mamba::Dims;
using parity::mamba::ExpectMatchOverCalls;
using parity::mamba::HostLayer;
using parity::mamba::HostStep;
using parity::mamba::MakeLayer;
using parity::mamba::MakeStep;
using parity::mamba::RunOps;
using parity::mamba::Trace;

TEST(MambaOpsGpuTest, MatchesCpuOverMixedSegments) {
  Pair p;
  ASSERT_NE(p.cuda, nullptr);
  // Realistic; odd sizes (scalar state rows, unaligned slots); every register
  // specialisation; and the global-memory fallbacks (k = 6, n = 3, n = 64).
  for (const Dims& dims :
       {Dims{1536, 16, 4, 0}, Dims{37, 5, 4, 0}, Dims{37, 5, 3, 1},
        Dims{40, 32, 2, 0}, Dims{72, 8, 4, 3}, Dims{64, 4, 4, 0},
        Dims{33, 3, 6, 0}, Dims{96, 64, 4, 0}}) {
    ExpectMatchOverCalls(*p.cpu, *p.cuda, dims, FixedMixedCalls(),
                         Bound::Below(kTol));
  }
}

// Decode after prefill (the decode scan, mamba_ops.cc's choice for decode
// calls) at the 130M and 1.4B models' d_inner and at odd sizes.
TEST(MambaOpsGpuTest, DecodeScanMatchesCpuAfterPrefill) {
  Pair p;
  ASSERT_NE(p.cuda, nullptr);
  for (const Dims& dims :
       {Dims{1536, 16, 4, 0}, Dims{4096, 16, 4, 0}, Dims{37, 4, 4, 1},
        Dims{45, 8, 3, 0}, Dims{23, 32, 4, 2}}) {
    ExpectMatchOverCalls(*p.cpu, *p.cuda, dims,
                         parity::PrefillThenDecodeCalls(), Bound::Below(kTol));
  }
}

// A decode step padded to a bucket, recorded once and replayed with new
// inputs and a new slot assignment, equals the same step run eagerly (and the
// CPU's); the state carries across the steps.
TEST(MambaOpsGpuTest, ReplayedStepMatchesEager) {
  auto cpu = MakeCpuBackend(1);
  auto eager = MakeCuda(CudaWeights::kF32, /*graphs=*/false);
  ASSERT_NE(eager, nullptr);
  for (const Dims& dims : {Dims{1536, 16, 4, 0}, Dims{37, 5, 4, 0}}) {
    // A recording belongs to one model's buffers: the next layer size gets a
    // backend of its own rather than replaying the last one's graph.
    auto rec = MakeCuda(CudaWeights::kF32, /*graphs=*/true);
    ASSERT_NE(rec, nullptr);
    SCOPED_TRACE(testing::Message() << "e=" << dims.e << " n=" << dims.n);
    const HostLayer layer = MakeLayer(dims, 4, 300 + dims.e);
    const std::vector<std::vector<Segment>> calls = PaddedDecodeCalls();
    std::vector<HostStep> steps;
    for (size_t i = 0; i < calls.size(); ++i) {
      steps.push_back(
          MakeStep(dims, calls[i], 400 + 10 * static_cast<uint32_t>(i)));
    }
    Trace got[3];
    int which = 0;
    for (Backend* be : {cpu.get(), eager.get(), rec.get()}) {
      DeviceLayer l(*be, layer);
      // One set of buffers: a replay reuses the recorded addresses.
      DeviceStep s(*be, dims, 4);
      for (const HostStep& step : steps) {
        s.Load(*be, step);
        ASSERT_TRUE(be->RunCaptured(4, [&] {
                        RunOps(*be, l, s, step.segs);
                        return absl::OkStatus();
                      }).ok());
        got[which].x.push_back(s.x.Read());
        got[which].y.push_back(s.y.Read());
        got[which].arena.push_back(l.arena.Read());
        ASSERT_TRUE(be->TakeError().ok());
      }
      ++which;
    }
    for (size_t i = 0; i < steps.size(); ++i) {
      // The same kernels on the same inputs: bit for bit.
      EXPECT_EQ(MaxAbsDiff(got[1].y[i], got[2].y[i]), 0.0f) << "step " << i;
      EXPECT_EQ(MaxAbsDiff(got[1].x[i], got[2].x[i]), 0.0f) << "step " << i;
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
