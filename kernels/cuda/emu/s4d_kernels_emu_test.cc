// S4D's recurrence kernel (kernels/s4d_kernels.cu), run on the CUDA
// emulation, equals the CPU backend's op: the output and the whole state
// arena after each call, over calls that mix decode rows, prefill chunks and
// zero-length padding on a slot a real segment also uses, for every register
// mode count (4..32, aligned and unaligned slots), several output copies and
// the global-memory fallback (m = 5, m = 64), and with the layer's folded
// GELU or residual add.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

#include "kernels/cuda/emu/emu_test_util.h"
#include "kernels/cuda/s4d_kernels.h"
#include "kernels/cuda/testing/s4d_cases.h"

namespace seqboat::emu_test {
namespace {

// The same S4dUpdate / S4dReadout per (token, channel) in the same order on
// both sides; the CPU backend's -ffast-math build may contract or reorder
// the complex products differently (seen: up to ~1e-6 on states of ~4). A
// wrong index or mode is off by O(1).
constexpr float kTol = 1e-5f;

using parity::Bound;
using parity::s4d::Dims;
using parity::s4d::ExpectMatchOverCalls;

class S4dEmulation : public EmulatedBackend {
 public:
  // Host memory is device memory here: the segments need no staging.
  void S4dScan(const S4dScanParams& p) override {
    cuda::LaunchS4dScan(p, nullptr);
  }
};

TEST(S4dKernelsEmuTest, MatchesCpuOverMixedSegments) {
  for (const Dims& dims :
       {Dims{130, 32, 1, 2.0f, 0}, Dims{37, 5, 2, 1.0f, 0},
        Dims{48, 16, 2, 2.0f, 3}, Dims{70, 8, 3, 2.0f, 0},
        Dims{64, 4, 1, 1.0f, 1}, Dims{40, 64, 1, 1.0f, 0},
        Dims{65, 32, 2, 2.0f, 2}, Dims{96, 16, 1, 2.0f, 0, Activation::kGelu},
        Dims{50, 5, 1, 1.0f, 1, Activation::kIdentity, true}}) {
    const auto calls = MixedCalls(dims.h * 3 + dims.m, 6, 9);
    auto cpu = MakeCpuBackend(1);
    S4dEmulation emu;
    const int64_t launches = emu::State().launches;
    ExpectMatchOverCalls(*cpu, emu, dims, calls, Bound::AtMost(kTol));
    EXPECT_EQ(emu::State().launches - launches,
              static_cast<int64_t>(calls.size()));
  }
}

}  // namespace
}  // namespace seqboat::emu_test
