// Shared pieces of the GPU parity tests: every CUDA op is run on the same
// inputs as the CPU backend's and compared. These tests are tagged "gpu"; on
// a machine without a device they fail (never skip) with the CUDA error.
#ifndef SEQBOAT_KERNELS_GPU_TEST_UTIL_H_
#define SEQBOAT_KERNELS_GPU_TEST_UTIL_H_

#include <cmath>
#include <cstdint>
#include <memory>
#include <random>
#include <vector>

#include "engine/backend/backend.h"
#include "engine/cpu/cpu_backend.h"
#include "gtest/gtest.h"
#include "kernels/cuda_backend.h"

namespace seqboat::gpu_test {

// fp32 weights unless a test asks otherwise: the 1e-4 parity mode.
inline std::unique_ptr<Backend> MakeCuda(
    CudaWeights weights = CudaWeights::kF32, bool graphs = true) {
  CudaBackendOptions o;
  o.weights = weights;
  o.graphs = graphs;
  auto be = MakeCudaBackend(o);
  EXPECT_TRUE(be.ok()) << be.status();
  return be.ok() ? *std::move(be) : nullptr;
}

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

// A float array living on one backend, filled from and read back to host.
class Array {
 public:
  Array(Backend& be, const std::vector<float>& host)
      : be_(be), n_(host.size()) {
    auto buf = be.Alloc(n_ * sizeof(float));
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

// The two backends a parity test runs the same op on: the single-threaded
// CPU backend (the reference) and CUDA with fp32 weights (null, with a test
// failure, where no device is usable).
struct Pair {
  std::unique_ptr<Backend> cpu = MakeCpuBackend(1);
  std::unique_ptr<Backend> cuda = MakeCuda();
};

}  // namespace seqboat::gpu_test

#endif  // SEQBOAT_KERNELS_GPU_TEST_UTIL_H_
