// Gated DeltaNet's scan kernel (kernels/gdn_kernels.cu), run on the CUDA
// emulation, equals the CPU backend's op: the output and the whole state arena
// after each call, over calls that mix decode rows, prefill chunks and
// zero-length padding on a slot a real segment also uses; for one and several
// value heads per key head, a value head narrower than a warp and one wider
// than it by a partial warp, and unaligned slots.
#include <cstdint>
#include <vector>

#include "kernels/cuda/emu/emu_test_util.h"
#include "kernels/cuda/gdn_kernels.h"
#include "kernels/cuda/testing/gdn_cases.h"

namespace seqboat::emu_test {
namespace {

// The kernel may fuse the state's multiply-adds where the CPU rounds twice,
// and the CPU vectorises its sums; states stay O(1) (k̂ and q̂ are unit
// vectors, β <= 1), so last-bit differences stay far below this, and an
// indexing or head-map error is O(0.1) or more.
constexpr float kTol = 1e-4f;

using parity::Bound;
using parity::gdn::Dims;
using parity::gdn::ExpectMatchOverCalls;

class GdnEmulation : public EmulatedBackend {
 public:
  // Host memory is device memory here: the segments need no staging.
  void GdnScan(const GdnScanParams& p) override {
    cuda::LaunchGdnScan(p, nullptr);
  }
};

TEST(GdnKernelsEmuTest, MatchesCpuOverMixedSegments) {
  for (const Dims& dims : {
           Dims{1, 1, 8, 8, 0},    // one head, a quarter warp
           Dims{2, 4, 16, 12, 1},  // two value heads per key head, unaligned
           Dims{2, 2, 12, 40, 0},  // a warp and a partial one per head
           Dims{1, 3, 32, 32, 3},  // three value heads on one key head
       }) {
    const auto calls = MixedCalls(dims.k_dim * 7 + dims.v_dim, 3, 7);
    auto cpu = MakeCpuBackend(1);
    GdnEmulation emu;
    const int64_t launches = emu::State().launches;
    ExpectMatchOverCalls(*cpu, emu, dims, calls, Bound::AtMost(kTol));
    EXPECT_EQ(emu::State().launches - launches,
              static_cast<int64_t>(calls.size()));
  }
}

}  // namespace
}  // namespace seqboat::emu_test
