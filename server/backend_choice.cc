#include "server/backend_choice.h"

#include "absl/strings/str_cat.h"
#include "kernels/cpu/cpu_backend.h"
#include "kernels/cpu/cpu_isa.h"
#include "spdlog/spdlog.h"
#if SEQBOAT_WITH_CUDA
#include "kernels/cuda/cuda_backend.h"
#endif

namespace seqboat {
namespace {

absl::StatusOr<std::unique_ptr<Backend>> Cpu(const BackendChoice& choice) {
  CpuBackendOptions cpu;
  cpu.threads = choice.cpu_threads;
  cpu.weights =
      choice.cpu_weights == "auto" ? choice.stored_weights : choice.cpu_weights;
  cpu.isa = choice.cpu_isa;
  auto be = MakeCpuBackend(cpu);
  if (be.ok()) {
    spdlog::info("backend {}: {}; {}", choice.name, (*be)->DeviceName(),
                 cpu::DetectCpu().Describe());
  }
  return be;
}

}  // namespace

absl::StatusOr<std::unique_ptr<Backend>> ChooseBackend(
    const BackendChoice& choice) {
  const std::string& want = choice.name;
  if (want != "cpu" && want != "cuda" && want != "auto") {
    return absl::InvalidArgumentError(
        absl::StrCat("unknown backend '", want, "' (cpu, cuda or auto)"));
  }
  if (want == "cpu") {
    spdlog::debug("backend cpu: chosen by flag");
    return Cpu(choice);
  }
#if SEQBOAT_WITH_CUDA
  std::string why;
  const int devices = CudaDeviceCount(&why);
  if (devices > 0) {
    auto weights = ParseCudaWeights(choice.cuda_weights);
    if (!weights.ok()) return weights.status();
    CudaBackendOptions cuda;
    cuda.device = choice.cuda_device;
    cuda.weights = *weights;
    cuda.graphs = choice.cuda_graphs;
    cuda.pipeline = choice.cuda_pipeline;
    cuda.early_launch = choice.cuda_early_launch;
    auto be = MakeCudaBackend(cuda);
    if (be.ok()) {
      spdlog::info(
          "backend {}: CUDA device {} of {}, {} weights, graphs {}, pipelined "
          "steps {}, early launches {}",
          want, choice.cuda_device, devices, choice.cuda_weights,
          choice.cuda_graphs ? "on" : "off",
          choice.cuda_pipeline ? "on" : "off",
          choice.cuda_early_launch ? "on" : "off");
      return be;
    }
    if (want == "cuda") return be.status();
    why = std::string(be.status().message());
  } else if (want == "cuda") {
    return absl::FailedPreconditionError(
        absl::StrCat("backend cuda: no CUDA device (", why, ")"));
  }
  spdlog::info("backend auto: using cpu because no CUDA device is usable ({})",
               why);
#else
  if (want == "cuda") {
    return absl::FailedPreconditionError(
        "backend cuda: this build has no CUDA backend (built with "
        "--define=cuda=off)");
  }
  spdlog::info("backend auto: using cpu (built without CUDA)");
#endif
  return Cpu(choice);
}

}  // namespace seqboat
