// Shared pieces of the emulation tests: each runs the real kernels of one
// family (kernels/*.cu on the CPU emulation) behind the Backend interface and
// compares them with the CPU backend on the same inputs, like the GPU parity
// tests in kernels/*_gpu_test.cc, which need a device.
#ifndef SEQBOAT_KERNELS_CUDA_EMU_EMU_TEST_UTIL_H_
#define SEQBOAT_KERNELS_CUDA_EMU_EMU_TEST_UTIL_H_

#include <algorithm>
#include <cstdint>
#include <memory>
#include <random>
#include <utility>
#include <vector>

#include "engine/backend/backend.h"
#include "engine/backend/testing/forwarding_backend.h"
#include "gtest/gtest.h"
#include "kernels/cpu/cpu_backend.h"
#include "kernels/cuda/testing/parity_util.h"
#include "tools/cuda_emu/emulator.h"

namespace seqboat::emu_test {

using parity::Array;
using parity::MaxAbsDiff;
using parity::Random;
using parity::RowsOf;
using parity::SameBits;

// The CPU backend with some ops replaced by emulated kernels, which take its
// host memory as device memory. Tests derive from it and override their
// family's ops.
class EmulatedBackend : public ForwardingBackend {
 public:
  EmulatedBackend() : ForwardingBackend(MakeCpuBackend(1)) {}
  std::string name() const override { return "cuda-emulation"; }
  // Launch errors of the emulated kernels since the last call, as an error.
  absl::Status TakeError() override {
    const std::string failures = emu::TakeFailures();
    if (!failures.empty()) return absl::InternalError(failures);
    return ForwardingBackend::TakeError();
  }
};

// A step's segments over `slots` slots, the last of which no segment uses:
// in random order, each used slot once with a decode row (len 1) or a prefill
// chunk (2 .. max_chunk), plus zero-length padding segments on a slot that
// a real segment of the call also uses (one row each, as the model pads).
inline std::vector<Segment> RandomSegments(std::mt19937& gen, int slots,
                                           int max_chunk) {
  std::vector<std::pair<int, int>> real;  // slot, len
  for (int slot = 0; slot + 1 < slots; ++slot) {
    const int r = static_cast<int>(gen() % 10);
    if (r < 2) continue;
    const int len =
        r < 7 ? 1 : 2 + static_cast<int>(gen() % std::max(1, max_chunk - 1));
    real.push_back({slot, len});
  }
  if (real.empty()) real.push_back({0, 1});
  std::shuffle(real.begin(), real.end(), gen);
  const int pad_slot = real[gen() % real.size()].first;
  const int pads = 1 + static_cast<int>(gen() % 2);
  for (int i = 0; i < pads; ++i) {
    const size_t at = gen() % (real.size() + 1);
    real.insert(real.begin() + static_cast<std::ptrdiff_t>(at), {pad_slot, 0});
  }
  std::vector<Segment> segs;
  int rows = 0;
  for (const auto& [slot, len] : real) {
    segs.push_back(Segment{slot, rows, len});
    rows += std::max(len, 1);
  }
  return segs;
}

// The GPU parity tests' calls over 5 slots (decode, prefill, padding on slot
// 0 before and after its real segment; slot 4 never used), then `random`
// calls of RandomSegments with chunks up to `max_chunk` rows.
inline std::vector<std::vector<Segment>> MixedCalls(uint32_t seed, int random,
                                                    int max_chunk) {
  std::vector<std::vector<Segment>> calls = parity::FixedMixedCalls();
  std::mt19937 gen(seed);
  for (int i = 0; i < random; ++i) {
    calls.push_back(RandomSegments(gen, 5, max_chunk));
  }
  return calls;
}

}  // namespace seqboat::emu_test

#endif  // SEQBOAT_KERNELS_CUDA_EMU_EMU_TEST_UTIL_H_
