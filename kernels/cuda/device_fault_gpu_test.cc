// A kernel fault that poisons the CUDA context must leave the backend
// unhealthy for good (Backend::Health), which is what makes the server stop
// and be restarted. A binary of its own: after the fault no other test could
// use the device. Not run under compute-sanitizer, which would report the
// fault it provokes.
#include <cstdint>
#include <string>
#include <vector>

#include "kernels/cuda/testing/gpu_test_util.h"

namespace seqboat::gpu_test {
namespace {

TEST(DeviceFaultGpuTest, IllegalAddressLeavesTheBackendUnhealthyForGood) {
  auto be = MakeCuda(CudaWeights::kF32, /*graphs=*/false);
  ASSERT_NE(be, nullptr);
  EXPECT_TRUE(be->Health().ok());
  const std::vector<float> w = Random(64, 1);
  auto m = be->UploadMatrix(w.data(), 8, 8);
  ASSERT_TRUE(m.ok()) << m.status();
  Array y(*be, 8);

  // A failure the process recovers from (memory the device does not have)
  // is not a fault.
  auto huge = be->Alloc(size_t{1} << 50);
  EXPECT_EQ(huge.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_TRUE(be->TakeError().ok());
  EXPECT_TRUE(be->Health().ok());

  // An input address far outside any allocation: the GEMV reads it.
  const auto* bogus = reinterpret_cast<const float*>(uintptr_t{1} << 46);
  GemmParams m2;
  m2.x = bogus;
  m2.ldx = 8;
  m2.n = 1;
  m2.w = *m;
  m2.y = y.get();
  m2.ldy = 8;
  be->Gemm(m2);
  std::vector<float> host(8);
  be->CopyToHost(host.data(), y.get(), host.size() * sizeof(float));
  const absl::Status step = be->TakeError();
  EXPECT_FALSE(step.ok());
  const absl::Status health = be->Health();
  EXPECT_EQ(health.code(), absl::StatusCode::kUnavailable) << health;
  EXPECT_NE(health.message().find("cudaErrorIllegalAddress"), std::string::npos)
      << health;

  // For good: later work fails, and the health stays what it was.
  be->CopyToHost(host.data(), y.get(), host.size() * sizeof(float));
  EXPECT_FALSE(be->TakeError().ok());
  EXPECT_EQ(be->Health(), health);
}

}  // namespace
}  // namespace seqboat::gpu_test
