// Mamba-2's scan and gated-norm kernels (kernels/mamba2_kernels.cu), run on
// the CUDA emulation, equal the CPU backend's ops: the scan's output, the
// normed output and the whole state arena after each call, over calls that mix
// decode rows, prefill chunks and zero-length padding on a slot a real segment
// also uses; for every register size (entries per lane 1, 2, 4, 8), the
// global-memory fallback (n_state 300), head_dim that leaves warps partly or
// wholly without rows, several groups, and a clamped Δ. And Mamba2Step: its
// fused decode kernels equal the CPU after prefill, at the 130M and 2.7B
// models' sizes, and the three kernels they replace bit for bit.
#include <cstdint>
#include <vector>

#include "kernels/cuda/emu/emu_test_util.h"
#include "kernels/cuda/mamba2_kernels.h"
#include "kernels/cuda/mamba_kernels.h"
#include "kernels/cuda/testing/mamba2_cases.h"
#include "kernels/cuda/testing/mamba2_step_cases.h"

namespace seqboat::emu_test {
namespace {

// The CPU sums C · h in order over n, the kernel per lane then across lanes
// (and the CPU vectorises exp under -ffast-math). With random states of up
// to 200 entries per row the scan's outputs reach tens, and the gated norm
// over groups of 3 passes their last-bit differences on at ~1e-5 (seen:
// 2.0e-5); an indexing or state error is O(1).
constexpr float kTol = 1e-4f;

using parity::Bound;
using parity::mamba2::Dims;
using parity::mamba2::ExpectMatchOverCalls;

class Mamba2Emulation : public EmulatedBackend {
 public:
  // Host memory is device memory here: the segments need no staging.
  void Mamba2Scan(const Mamba2ScanParams& p) override {
    cuda::LaunchMamba2Scan(p, nullptr);
  }
  void GatedRmsNorm(const GatedRmsNormParams& p) override {
    cuda::LaunchGatedRmsNorm(p, nullptr);
  }
  void MambaConv(const MambaConvParams& p) override {
    cuda::LaunchMambaConv(p, nullptr);
  }
  // The CUDA backend's choice (mamba2_ops.cc); op by op when `fuse` is off.
  void Mamba2Step(const Mamba2StepParams& p) override {
    if (fuse && AllDecodeRows(p.scan.segs, p.scan.nsegs) &&
        cuda::Mamba2StepFuses(p)) {
      ++fused_calls;
      cuda::LaunchMamba2Step(p, nullptr);
      return;
    }
    MambaConv(p.conv);
    Mamba2Scan(p.scan);
    GatedRmsNorm(p.norm);
  }
  bool fuse = true;
  int fused_calls = 0;
};

TEST(Mamba2KernelsEmuTest, MatchesCpuOverMixedSegments) {
  for (const Dims& dims : {
           Dims{4, 8, 16, 2, 0, false},    // 1 entry per lane, lanes idle
           Dims{6, 5, 20, 3, 1, true},     // partial warps, unaligned slots
           Dims{3, 7, 48, 1, 0, false},    // 2 per lane
           Dims{2, 64, 128, 1, 0, false},  // the released models' head
           Dims{2, 3, 200, 2, 3, true},    // 8 per lane
           Dims{8, 18, 10, 4, 0, false},   // two blocks per head
           Dims{2, 4, 300, 1, 0, false},   // global-memory fallback
       }) {
    const auto calls = MixedCalls(dims.n * 7 + dims.head_dim, 3, 7);
    auto cpu = MakeCpuBackend(1);
    Mamba2Emulation emu;
    const int64_t launches = emu::State().launches;
    ExpectMatchOverCalls(*cpu, emu, dims, calls, Bound::AtMost(kTol));
    // The scan and the norm are kernels on every call.
    EXPECT_EQ(emu::State().launches - launches,
              2 * static_cast<int64_t>(calls.size()));
  }
}

// The models' shapes (head_dim 64, n_state 128, one group; 24 heads for
// mamba2-130m, 80 for mamba2-2.7b) and odd ones: each entries-per-lane size,
// heads whose last block has fewer rows than warps, several groups, a
// clamped Δ; k = 3 and n_state 300 take the three ops.
constexpr Dims kStepDims[] = {
    {24, 64, 128, 1, 0, false}, {80, 64, 128, 1, 0, false},
    {4, 8, 16, 2, 0, false},    {6, 5, 20, 3, 1, true},
    {3, 20, 48, 1, 0, false},   {2, 3, 200, 2, 3, true},
    {2, 4, 300, 1, 0, false},
};

TEST(Mamba2KernelsEmuTest, StepMatchesCpuAfterPrefill) {
  for (const Dims& dims : kStepDims) {
    for (int k : {4, 3}) {
      if (k == 3 && dims.heads > 8) continue;  // the fallback, on small ones
      auto cpu = MakeCpuBackend(1);
      Mamba2Emulation emu;
      parity::mamba2_step::ExpectMatchOverCalls(
          *cpu, emu, dims, k, parity::PrefillThenDecodeCalls(),
          Bound::AtMost(kTol));
      // The last three calls are decode, fused where the shape allows.
      EXPECT_EQ(emu.fused_calls, k == 4 && dims.n <= 256 ? 3 : 0);
    }
  }
}

// The fused kernels are the three kernels' arithmetic in the same order:
// equal bit for bit, over decode calls (padded, slots in changing order) and
// over mixed calls, which they compute token by token when forced to.
TEST(Mamba2KernelsEmuTest, FusedStepEqualsThreeKernelsBitForBit) {
  class Forced : public Mamba2Emulation {
   public:
    void Mamba2Step(const Mamba2StepParams& p) override {
      cuda::LaunchMamba2Step(p, nullptr);
    }
  };
  for (const Dims& dims : kStepDims) {
    if (dims.n > 256) continue;
    for (const auto& calls :
         {parity::PrefillThenDecodeCalls(), MixedCalls(dims.n, 3, 7)}) {
      Mamba2Emulation ops;
      ops.fuse = false;
      Forced fused;
      parity::mamba2_step::ExpectMatchOverCalls(ops, fused, dims, 4, calls,
                                                Bound::Bitwise());
    }
  }
}

}  // namespace
}  // namespace seqboat::emu_test
