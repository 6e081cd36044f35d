// Mamba-1's conv and scan kernels (kernels/mamba_kernels.cu), run on the CUDA
// emulation, equal the CPU backend's ops: the outputs and the whole state
// arena after each call, over calls that mix decode rows, prefill chunks and
// zero-length padding on a slot a real segment also uses, for every register
// specialisation and the global-memory fallbacks (k = 6; n = 3, 64); and the
// decode scan, which the backend takes for calls of decode rows only, after
// prefill and at the 130M and 1.4B models' sizes.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

#include "kernels/cuda/emu/emu_test_util.h"
#include "kernels/cuda/mamba_kernels.h"
#include "kernels/cuda/testing/mamba_cases.h"

namespace seqboat::emu_test {
namespace {

// Both sides evaluate op_math's conv and scan arithmetic per (token, channel),
// but the CPU backend builds with -ffast-math and vectorises it (the state
// sum in another order of additions, contractions of its own), while the
// emulated kernels run it as scalar code: each op can differ by an ulp or two
// (seen: 2.4e-7 on outputs of magnitude ~1). An indexing or state error shows
// up as an O(1) difference.
constexpr float kTol = 1e-6f;

using parity::Bound;
using parity::mamba::Dims;
using parity::mamba::ExpectMatchOverCalls;

class MambaEmulation : public EmulatedBackend {
 public:
  // Host memory is device memory here: the segments need no staging, and
  // the kernels get the op's parameters as they are.
  void MambaConv(const MambaConvParams& p) override {
    cuda::LaunchMambaConv(p, nullptr);
  }
  // The CUDA backend's choice (mamba_ops.cc), or the decode kernel for every
  // call when `force_decode`.
  void MambaScan(const MambaScanParams& p) override {
    if (force_decode || AllDecodeRows(p.segs, p.nsegs)) {
      ++decode_launches;
      cuda::LaunchMambaScanDecode(p, cuda::Storage::kF32, nullptr);
    } else {
      cuda::LaunchMambaScan(p, nullptr);
    }
  }
  bool force_decode = false;
  int decode_launches = 0;
};

TEST(MambaKernelsEmuTest, MatchesCpuOverMixedSegments) {
  // Every register specialisation (k 2..4, n 4..32), odd sizes (scalar state
  // rows, unaligned slots, partial blocks) and the fallbacks (k = 6; n = 3,
  // n = 64).
  for (const Dims& dims :
       {Dims{160, 16, 4, 0}, Dims{37, 5, 4, 0}, Dims{37, 5, 3, 1},
        Dims{40, 32, 2, 0}, Dims{72, 8, 4, 3}, Dims{64, 4, 4, 0},
        Dims{33, 3, 6, 0}, Dims{96, 64, 4, 0}, Dims{65, 16, 4, 2}}) {
    const auto calls = MixedCalls(dims.e * 7 + dims.n, 6, 9);
    auto cpu = MakeCpuBackend(1);
    MambaEmulation emu;
    const int64_t launches = emu::State().launches;
    ExpectMatchOverCalls(*cpu, emu, dims, calls, Bound::AtMost(kTol));
    // Conv and scan are kernels on every call.
    EXPECT_EQ(emu::State().launches - launches,
              2 * static_cast<int64_t>(calls.size()));
  }
}

TEST(MambaKernelsEmuTest, DecodeScanMatchesCpuAfterPrefill) {
  // The 130M and 1.4B models' d_inner (d_state 16, 4 taps), every lane count
  // of the decode kernel with channels that leave its last block partial, and
  // n = 3 (the thread-per-channel fallback).
  for (const Dims& dims :
       {Dims{1536, 16, 4, 0}, Dims{4096, 16, 4, 0}, Dims{37, 4, 4, 1},
        Dims{45, 8, 3, 0}, Dims{23, 32, 4, 2}, Dims{33, 3, 4, 0}}) {
    auto cpu = MakeCpuBackend(1);
    MambaEmulation emu;
    ExpectMatchOverCalls(*cpu, emu, dims, parity::PrefillThenDecodeCalls(),
                         Bound::AtMost(kTol));
    // The first two calls carry prefill chunks; the other three are decode.
    EXPECT_EQ(emu.decode_launches, 3);
  }
}

// Longer segments are looped, so the decode kernel computes any call: a
// replayed recording could never compute a wrong step with it.
TEST(MambaKernelsEmuTest, DecodeScanMatchesCpuOverMixedSegments) {
  for (const Dims& dims :
       {Dims{160, 16, 4, 0}, Dims{37, 5, 4, 0}, Dims{72, 8, 4, 3}}) {
    auto cpu = MakeCpuBackend(1);
    MambaEmulation emu;
    emu.force_decode = true;
    ExpectMatchOverCalls(*cpu, emu, dims, MixedCalls(dims.e, 6, 9),
                         Bound::AtMost(kTol));
  }
}

}  // namespace
}  // namespace seqboat::emu_test
