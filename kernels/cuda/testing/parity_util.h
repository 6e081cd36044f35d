// Helpers every parity test of the kernels shares, whether it runs the
// kernels on a device (kernels/*_gpu_test.cc, gpu_test_util.h) or on the CPU
// emulation (kernels/emu/*_emu_test.cc, emu_test_util.h): seeded inputs,
// arrays on a backend, and the comparisons. Kept in one place so both kinds
// of test build their inputs, and judge their outputs, the same way.
#ifndef SEQBOAT_KERNELS_CUDA_TESTING_PARITY_UTIL_H_
#define SEQBOAT_KERNELS_CUDA_TESTING_PARITY_UTIL_H_

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <vector>

#include "absl/status/status.h"
#include "engine/backend/backend.h"
#include "gtest/gtest.h"

// Not `testing`: inside namespace seqboat that would hide gtest's
// ::testing from the tests' unqualified testing::Message().
namespace seqboat::parity {

// n floats uniform in [lo, hi), the same for the same seed on every run.
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

// How close the backend under test must come to the reference, as a bound
// on MaxAbsDiff: strictly below a value, at most a value (the emulation
// tests' bounds, set from the largest difference seen), or the same bits.
// A case both tests share takes each test's own.
struct Bound {
  enum Kind { kBelow, kAtMost, kSameBits };
  Kind kind = kSameBits;
  float value = 0.0f;

  static Bound Below(float v) { return {kBelow, v}; }
  static Bound AtMost(float v) { return {kAtMost, v}; }
  static Bound Bitwise() { return {kSameBits, 0.0f}; }
};

// Whether `got` is within `bound` of `want`; a NaN difference never is.
inline testing::AssertionResult Within(const std::vector<float>& want,
                                       const std::vector<float>& got,
                                       const Bound& bound) {
  const float d = MaxAbsDiff(want, got);
  switch (bound.kind) {
    case Bound::kBelow:
      if (d < bound.value) return testing::AssertionSuccess();
      return testing::AssertionFailure()
             << "max |difference| " << d << ", not below " << bound.value;
    case Bound::kAtMost:
      if (d <= bound.value) return testing::AssertionSuccess();
      return testing::AssertionFailure()
             << "max |difference| " << d << ", above " << bound.value;
    case Bound::kSameBits:
      break;
  }
  if (SameBits(want, got)) return testing::AssertionSuccess();
  return testing::AssertionFailure()
         << "not the same bits, max |difference| " << d;
}

// A float array living on one backend, filled from and read back to host.
class Array {
 public:
  Array(Backend& be, const std::vector<float>& host)
      : be_(be), n_(host.size()) {
    // At least one float: an empty array still needs a distinct address.
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

// No op failed on `be` since the last check.
inline void ExpectNoError(Backend& be) {
  const absl::Status status = be.TakeError();
  EXPECT_TRUE(status.ok()) << be.name() << ": " << status;
}

// Rows of the packed batch a step's segments span (a zero-length padding
// segment still owns one row).
inline int RowsOf(const std::vector<Segment>& segs) {
  int rows = 0;
  for (const Segment& g : segs) {
    rows = std::max(rows, g.start + std::max(g.len, 1));
  }
  return rows;
}

// The recurrent families' fixed calls over 5 slots: decode (len 1), prefill
// chunks (len > 1) and zero-length padding on slot 0 while slot 0 also runs
// a real segment, before or after it; slot 4 is never used and must keep its
// state.
inline std::vector<std::vector<Segment>> FixedMixedCalls() {
  return {
      {{1, 0, 1}, {0, 1, 6}, {3, 7, 1}, {0, 8, 0}, {0, 9, 0}},
      {{0, 0, 0}, {0, 1, 1}, {2, 2, 1}, {1, 3, 1}, {0, 4, 0}},
      {{3, 0, 9}, {0, 9, 1}, {2, 10, 0}, {1, 10, 2}},
      {{2, 0, 1}, {0, 1, 0}, {0, 2, 0}, {0, 3, 0}},
  };
}

// A decode step of three sequences padded to a bucket of 4, three times with
// new slot assignments; slot 0 is real every step (the replay tests).
inline std::vector<std::vector<Segment>> PaddedDecodeCalls() {
  return {
      {{2, 0, 1}, {0, 1, 1}, {3, 2, 1}, {0, 3, 0}},
      {{0, 0, 1}, {3, 1, 1}, {1, 2, 1}, {0, 3, 0}},
      {{1, 0, 1}, {2, 1, 1}, {0, 2, 1}, {0, 3, 0}},
  };
}

// Prefill chunks of different lengths on slots 0-3, then decode steps over
// them in changing order, padded to buckets (slot 4 never used): decode after
// prefill, each slot with a state of its own.
inline std::vector<std::vector<Segment>> PrefillThenDecodeCalls() {
  return {
      {{0, 0, 5}, {2, 5, 3}, {1, 8, 7}},
      {{3, 0, 2}, {0, 2, 1}, {2, 3, 1}},
      {{1, 0, 1}, {3, 1, 1}, {0, 2, 1}, {2, 3, 1}},
      {{2, 0, 1}, {0, 1, 1}, {0, 2, 0}, {0, 3, 0}},
      {{3, 0, 1}, {1, 1, 1}, {2, 2, 1}, {0, 3, 1}},
  };
}

// The state checks of a recurrent family's case over calls on 5 slots that
// never use slot 4 (FixedMixedCalls, emu_test_util.h's MixedCalls), with
// `stride` floats a slot, from the initial arena and the last arenas of the
// reference (want) and the backend under test (got): the calls moved the
// state, so the comparisons are not vacuous, and slot 4 kept its state bit
// for bit.
inline void ExpectStateMovedAndUnusedSlotKept(
    const std::vector<float>& initial, const std::vector<float>& want_last,
    const std::vector<float>& got_last, int64_t stride) {
  EXPECT_GT(MaxAbsDiff(initial, want_last), 0.0f);
  const size_t last = static_cast<size_t>(4 * stride);
  ASSERT_GE(got_last.size(), initial.size());
  EXPECT_TRUE(std::equal(initial.begin() + last, initial.end(),
                         got_last.begin() + last));
}

}  // namespace seqboat::parity

#endif  // SEQBOAT_KERNELS_CUDA_TESTING_PARITY_UTIL_H_
