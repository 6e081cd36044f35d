// The CPU backend: its own packed GEMM (kernels/cpu/packed_gemm.h) with the
// widest instruction set the processor runs, OpenMP loops over the shared op
// math (engine/backend/op_math.h) for everything else. Runs everywhere.
#ifndef SEQBOAT_KERNELS_CPU_CPU_BACKEND_H_
#define SEQBOAT_KERNELS_CPU_CPU_BACKEND_H_

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "engine/backend/backend.h"

namespace seqboat {

struct CpuBackendOptions {
  // OpenMP threads; <= 0 keeps the default (one per core).
  int threads = 0;
  // How matrices are kept: "fp32", "bf16", "fp16" or "int8" (weight-only,
  // one scale per output row). Routers (UploadMatrixFp32) stay fp32.
  std::string weights = "fp32";
  // "auto" (the widest the processor runs), "avx2" or "avx512".
  std::string isa = "auto";
};

// InvalidArgument for an unknown weight type or instruction set,
// FailedPrecondition for an instruction set this processor lacks.
absl::StatusOr<std::unique_ptr<Backend>> MakeCpuBackend(
    const CpuBackendOptions& options);

// fp32 weights on the widest instruction set (tests, tools).
std::unique_ptr<Backend> MakeCpuBackend(int threads = 0);

}  // namespace seqboat

#endif  // SEQBOAT_KERNELS_CPU_CPU_BACKEND_H_
