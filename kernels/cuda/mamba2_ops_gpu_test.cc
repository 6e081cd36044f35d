// Mamba-2's scan and gated norm on CUDA equal the CPU backend's: the outputs
// and the whole state arena after each of several calls that mix decode,
// prefill and zero-length padding segments (on a slot a real segment also
// uses), for every register size and the global-memory fallback; and a
// recorded step replayed with new inputs and segments equals running it
// eagerly. Mamba2Step (conv, scan and gated norm; fused for decode calls)
// likewise, after prefill, at the 130M and 2.7B models' sizes, equal bit for
// bit to its three ops called one by one, and replayed equal to eager.
#include <cstdint>
#include <vector>

#include "kernels/cuda/testing/gpu_test_util.h"
#include "kernels/cuda/testing/mamba2_cases.h"
#include "kernels/cuda/testing/mamba2_step_cases.h"

namespace seqboat::gpu_test {
namespace {

// As in the emulation test: scan outputs reach tens with n_state 200.
constexpr float kTol = 1e-4f;

using parity::Bound;
using parity::FixedMixedCalls;
using parity::PaddedDecodeCalls;
using parity::SameBits;
using parity::mamba2::DeviceLayer;
using parity::mamba2::DeviceStep;
using parity::mamba2::Dims;
using parity::mamba2::ExpectMatchOverCalls;
using parity::mamba2::HostLayer;
using parity::mamba2::HostStep;
using parity::mamba2::MakeLayer;
using parity::mamba2::MakeStep;
using parity::mamba2::NormParams;
using parity::mamba2::ScanParams;
using parity::mamba2::Trace;

TEST(Mamba2OpsGpuTest, MatchesCpuOverMixedSegments) {
  Pair p;
  ASSERT_NE(p.cuda, nullptr);
  for (const Dims& dims : {
           Dims{24, 64, 128, 1, 0, false},  // mamba2-130m
           Dims{16, 64, 128, 8, 0, false},  // Codestral-like groups
           Dims{4, 8, 16, 2, 0, false},
           Dims{6, 5, 20, 3, 1, true},
           Dims{3, 7, 48, 1, 0, false},
           Dims{2, 3, 200, 2, 3, true},
           Dims{8, 18, 10, 4, 0, false},
           Dims{2, 4, 300, 1, 0, false},
       }) {
    ExpectMatchOverCalls(*p.cpu, *p.cuda, dims, FixedMixedCalls(),
                         Bound::Below(kTol));
  }
}

TEST(Mamba2OpsGpuTest, ReplayedStepMatchesEager) {
  auto cpu = MakeCpuBackend(1);
  auto eager = MakeCuda(CudaWeights::kF32, /*graphs=*/false);
  ASSERT_NE(eager, nullptr);
  for (const Dims& dims :
       {Dims{24, 64, 128, 1, 0, false}, Dims{6, 5, 20, 3, 1, true}}) {
    // A recording belongs to one model's buffers.
    auto rec = MakeCuda(CudaWeights::kF32, /*graphs=*/true);
    ASSERT_NE(rec, nullptr);
    SCOPED_TRACE(testing::Message() << "heads=" << dims.heads);
    const HostLayer layer = MakeLayer(dims, 4, 300 + dims.heads);
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
                        be->Mamba2Scan(ScanParams(l, s, step.segs));
                        be->GatedRmsNorm(NormParams(l, s, 4));
                        return absl::OkStatus();
                      }).ok());
        got[which].o.push_back(s.y.Read());
        got[which].arena.push_back(l.arena.Read());
        ASSERT_TRUE(be->TakeError().ok());
      }
      ++which;
    }
    for (size_t i = 0; i < steps.size(); ++i) {
      // The same kernels on the same inputs: bit for bit.
      EXPECT_EQ(MaxAbsDiff(got[1].o[i], got[2].o[i]), 0.0f) << "step " << i;
      EXPECT_EQ(MaxAbsDiff(got[1].arena[i], got[2].arena[i]), 0.0f)
          << "step " << i;
      EXPECT_LT(MaxAbsDiff(got[0].o[i], got[2].o[i]), kTol) << "step " << i;
      EXPECT_LT(MaxAbsDiff(got[0].arena[i], got[2].arena[i]), kTol)
          << "step " << i;
    }
    EXPECT_GT(MaxAbsDiff(got[1].o[0], got[1].o[1]), 0.0f);  // inputs changed
  }
}

constexpr Dims kStepDims[] = {
    {24, 64, 128, 1, 0, false},  // mamba2-130m
    {80, 64, 128, 1, 0, false},  // mamba2-2.7b
    {6, 5, 20, 3, 1, true},     {3, 20, 48, 1, 0, false},
    {2, 3, 200, 2, 3, true},    {2, 4, 300, 1, 0, false},
};

TEST(Mamba2OpsGpuTest, StepMatchesCpuAfterPrefill) {
  Pair p;
  ASSERT_NE(p.cuda, nullptr);
  for (const Dims& dims : kStepDims) {
    parity::mamba2_step::ExpectMatchOverCalls(*p.cpu, *p.cuda, dims, 4,
                                              parity::PrefillThenDecodeCalls(),
                                              Bound::Below(kTol));
  }
}

// The fused decode kernels sum in the three kernels' order.
TEST(Mamba2OpsGpuTest, FusedStepEqualsOpByOpBitForBit) {
  auto cuda = MakeCuda(CudaWeights::kF32, /*graphs=*/false);
  ASSERT_NE(cuda, nullptr);
  for (const Dims& dims : kStepDims) {
    parity::mamba2_step::ExpectMatchOverCalls(
        *cuda, *cuda, dims, 4, parity::PrefillThenDecodeCalls(),
        Bound::Bitwise(), /*ref_op_by_op=*/true);
  }
}

TEST(Mamba2OpsGpuTest, ReplayedStepOpMatchesEager) {
  namespace step = parity::mamba2_step;
  auto eager = MakeCuda(CudaWeights::kF32, /*graphs=*/false);
  ASSERT_NE(eager, nullptr);
  for (const Dims& dims :
       {Dims{24, 64, 128, 1, 0, false}, Dims{6, 5, 20, 3, 1, true}}) {
    auto rec = MakeCuda(CudaWeights::kF32, /*graphs=*/true);
    ASSERT_NE(rec, nullptr);
    SCOPED_TRACE(testing::Message() << "heads=" << dims.heads);
    const step::HostLayer layer = step::MakeLayer(dims, 4, 4, 700);
    const std::vector<step::HostStep> steps =
        step::MakeSteps(dims, PaddedDecodeCalls(), 800);
    step::Trace got[2];
    int which = 0;
    for (Backend* be : {eager.get(), rec.get()}) {
      step::DeviceLayer l(*be, layer);
      step::DeviceStep s(*be, dims, 4);  // a replay reuses the addresses
      for (const step::HostStep& st : steps) {
        s.Load(*be, st);
        ASSERT_TRUE(be->RunCaptured(4, [&] {
                        be->Mamba2Step(step::StepParams(l, s, st.segs, 4));
                        return absl::OkStatus();
                      }).ok());
        got[which].o.push_back(s.y.Read());
        got[which].arena.push_back(l.arena.Read());
        ASSERT_TRUE(be->TakeError().ok());
      }
      ++which;
    }
    for (size_t i = 0; i < steps.size(); ++i) {
      EXPECT_TRUE(SameBits(got[0].o[i], got[1].o[i])) << "step " << i;
      EXPECT_TRUE(SameBits(got[0].arena[i], got[1].arena[i])) << "step " << i;
    }
    EXPECT_GT(MaxAbsDiff(got[0].o[0], got[0].o[1]), 0.0f);  // inputs changed
  }
}

}  // namespace
}  // namespace seqboat::gpu_test
