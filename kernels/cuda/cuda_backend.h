// The CUDA backend: every Backend op as a GPU kernel, projections through
// cuBLAS with bf16 (or fp16, or fp32, or fp8 widened to bf16) weights and
// fp32 accumulation, small batches through our own GEMV, decode
// steps recorded as CUDA graphs per batch bucket. Built everywhere nvcc is
// installed; needs a GPU only to run.
#ifndef SEQBOAT_KERNELS_CUDA_BACKEND_H_
#define SEQBOAT_KERNELS_CUDA_BACKEND_H_

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "engine/backend/backend.h"

namespace seqboat {

// kFp8: e4m3 with one fp32 scale per output row (Ada and Hopper only).
enum class CudaWeights { kBf16, kF16, kF32, kFp8 };

struct CudaBackendOptions {
  int device = 0;
  // Storage of UploadMatrix weights; activations and state stay fp32.
  CudaWeights weights = CudaWeights::kBf16;
  // Record decode steps as CUDA graphs (Backend::RunCaptured).
  bool graphs = true;
  // Let the engine launch a step before it reads the last one
  // (Backend::PipelinesSteps).
  bool pipeline = true;
  // Launch kernels early behind the kernel before them (Hopper's
  // programmatic dependent launch, kernels/cuda/launch.cuh): they wait
  // there, resident, and the small-batch GEMVs stream their weights into
  // L2 while it finishes. The sampling kernels launch plainly.
  bool early_launch = true;
};

// Usable CUDA devices; 0 with `why` saying why not (no driver, no device,
// a driver older than the runtime...).
int CudaDeviceCount(std::string* why);

// "bf16", "fp16"/"f16", "fp32"/"f32" or "fp8".
absl::StatusOr<CudaWeights> ParseCudaWeights(const std::string& name);

// Fails with a message naming the device and the CUDA error when the device
// cannot be opened.
absl::StatusOr<std::unique_ptr<Backend>> MakeCudaBackend(
    const CudaBackendOptions& options);

}  // namespace seqboat

#endif  // SEQBOAT_KERNELS_CUDA_BACKEND_H_
