// Gated DeltaNet's scan on CUDA equals the CPU backend's: the output and the
// whole state arena after each of several calls that mix decode, prefill and
// zero-length padding segments (on a slot a real segment also uses), at
// Qwen3.5's and Qwen3-Next's head shapes and small ones.
#include <cstdint>
#include <vector>

#include "kernels/cuda/testing/gdn_cases.h"
#include "kernels/cuda/testing/gpu_test_util.h"

namespace seqboat::gpu_test {
namespace {

constexpr float kTol = 1e-4f;

using parity::Bound;
using parity::FixedMixedCalls;
using parity::gdn::Dims;
using parity::gdn::ExpectMatchOverCalls;

TEST(GdnOpsGpuTest, MatchesCpuOverMixedSegments) {
  Pair p;
  ASSERT_NE(p.cuda, nullptr);
  for (const Dims& dims : {
           Dims{16, 16, 128, 128, 0},  // Qwen3.5-0.8B
           Dims{16, 32, 128, 128, 0},  // Qwen3-Next: two value heads a key
           Dims{2, 4, 16, 12, 1},
           Dims{2, 2, 12, 40, 0},
       }) {
    ExpectMatchOverCalls(*p.cpu, *p.cuda, dims, FixedMixedCalls(),
                         Bound::Below(kTol));
  }
}

}  // namespace
}  // namespace seqboat::gpu_test
