// Shared pieces of the emulation tests: each runs the real kernels of one
// family (kernels/*.cu on the CPU emulation) behind the Backend interface and
// compares them with the CPU backend on the same inputs, like the GPU parity
// tests in kernels/*_gpu_test.cc, which need a device.
#ifndef SEQBOAT_KERNELS_EMU_EMU_TEST_UTIL_H_
#define SEQBOAT_KERNELS_EMU_EMU_TEST_UTIL_H_

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <memory>
#include <random>
#include <utility>
#include <vector>

#include "engine/backend/backend.h"
#include "engine/backend/forwarding_backend.h"
#include "engine/cpu/cpu_backend.h"
#include "gtest/gtest.h"
#include "kernels/emu/emulator.h"

namespace seqboat::emu_test {

inline std::vector<float> Random(size_t n, uint32_t seed, float lo = -1.0f,
                                 float hi = 1.0f) {
  std::mt19937 gen(seed);
  std::uniform_real_distribution<float> dist(lo, hi);
  std::vector<float> v(n);
  for (float& x : v) x = dist(gen);
  return v;
}

inline float MaxAbsDiff(const std::vector<float>& a,
                        const std::vector<float>& b) {
  EXPECT_EQ(a.size(), b.size());
  float m = 0.0f;
  for (size_t i = 0; i < a.size() && i < b.size(); ++i) {
    const float d = std::fabs(a[i] - b[i]);
    if (!(d <= m)) m = d;  // NaN propagates as a failure
  }
  return m;
}

// Bitwise equality (NaN payloads and signed zeros included).
inline bool SameBits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() &&
         std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

// A float array living on one backend, filled from and read back to host.
class Array {
 public:
  Array(Backend& be, const std::vector<float>& host)
      : be_(be), n_(host.size()) {
    auto buf = be.Alloc(std::max<size_t>(n_, 1) * sizeof(float));
    EXPECT_TRUE(buf.ok()) << buf.status();
    buf_ = *buf;
    be.CopyToDevice(buf_.get(), host.data(), n_ * sizeof(float));
  }
  Array(Backend& be, size_t n) : Array(be, std::vector<float>(n, 0.0f)) {}
  float* get() { return static_cast<float*>(buf_.get()); }
  std::vector<float> Read() const {
    std::vector<float> out(n_);
    be_.CopyToHost(out.data(), buf_.get(), n_ * sizeof(float));
    return out;
  }
  std::vector<uint8_t> ReadBytes() const {
    std::vector<uint8_t> out(n_ * sizeof(float));
    be_.CopyToHost(out.data(), buf_.get(), out.size());
    return out;
  }

 private:
  Backend& be_;
  size_t n_;
  DeviceBuffer buf_;
};

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

inline int RowsOf(const std::vector<Segment>& segs) {
  int rows = 0;
  for (const Segment& g : segs)
    rows = std::max(rows, g.start + std::max(g.len, 1));
  return rows;
}

// The GPU parity tests' calls over 5 slots (decode, prefill, padding on slot
// 0 before and after its real segment; slot 4 never used), then `random`
// calls of RandomSegments with chunks up to `max_chunk` rows.
inline std::vector<std::vector<Segment>> MixedCalls(uint32_t seed, int random,
                                                    int max_chunk) {
  std::vector<std::vector<Segment>> calls = {
      {{1, 0, 1}, {0, 1, 6}, {3, 7, 1}, {0, 8, 0}, {0, 9, 0}},
      {{0, 0, 0}, {0, 1, 1}, {2, 2, 1}, {1, 3, 1}, {0, 4, 0}},
      {{3, 0, 9}, {0, 9, 1}, {2, 10, 0}, {1, 10, 2}},
      {{2, 0, 1}, {0, 1, 0}, {0, 2, 0}, {0, 3, 0}},
  };
  std::mt19937 gen(seed);
  for (int i = 0; i < random; ++i) {
    calls.push_back(RandomSegments(gen, 5, max_chunk));
  }
  return calls;
}

}  // namespace seqboat::emu_test

#endif  // SEQBOAT_KERNELS_EMU_EMU_TEST_UTIL_H_
