// Shared pieces of the GPU parity tests: every CUDA op is run on the same
// inputs as the CPU backend's and compared. These tests are tagged "gpu"; on
// a machine without a device they fail (never skip) with the CUDA error.
#ifndef SEQBOAT_KERNELS_CUDA_TESTING_GPU_TEST_UTIL_H_
#define SEQBOAT_KERNELS_CUDA_TESTING_GPU_TEST_UTIL_H_

#include <memory>

#include "engine/backend/backend.h"
#include "gtest/gtest.h"
#include "kernels/cpu/cpu_backend.h"
#include "kernels/cuda/cuda_backend.h"
#include "kernels/cuda/testing/parity_util.h"

namespace seqboat::gpu_test {

// fp32 weights unless a test asks otherwise: the 1e-4 parity mode.
inline std::unique_ptr<Backend> MakeCuda(
    CudaWeights weights = CudaWeights::kF32, bool graphs = true,
    bool early_launch = true) {
  CudaBackendOptions o;
  o.weights = weights;
  o.graphs = graphs;
  o.early_launch = early_launch;
  auto be = MakeCudaBackend(o);
  EXPECT_TRUE(be.ok()) << be.status();
  return be.ok() ? *std::move(be) : nullptr;
}

using parity::Array;
using parity::MaxAbsDiff;
using parity::Random;

// The two backends a parity test runs the same op on: the single-threaded
// CPU backend (the reference) and CUDA with fp32 weights (null, with a test
// failure, where no device is usable).
struct Pair {
  std::unique_ptr<Backend> cpu = MakeCpuBackend(1);
  std::unique_ptr<Backend> cuda = MakeCuda();
};

}  // namespace seqboat::gpu_test

#endif  // SEQBOAT_KERNELS_CUDA_TESTING_GPU_TEST_UTIL_H_
