// Which backend a process runs on, chosen once at its composition root (the
// server's main): the only target that links both the CPU and the CUDA
// backend. The engine and everything under it receive a Backend and never
// name one.
#ifndef SEQBOAT_SERVER_BACKEND_CHOICE_H_
#define SEQBOAT_SERVER_BACKEND_CHOICE_H_

#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "engine/backend/backend.h"

namespace seqboat {

struct BackendChoice {
  // "cpu", "cuda" (a GPU or an error) or "auto" (CUDA when a device is
  // usable, else the CPU, with the reason logged).
  std::string name = "cpu";
  int32_t cuda_device = 0;
  std::string cuda_weights = "bf16";  // bf16, fp16, fp32 or fp8 (sm_89+)
  bool cuda_graphs = true;            // record decode steps as CUDA graphs
  bool cuda_pipeline = true;          // launch a step before reading the last
  bool cuda_early_launch = true;      // kernels launched early (Hopper PDL)
  int32_t cpu_threads = 0;            // 0: one per core
  // fp32, bf16, fp16, int8, or auto: what the model file stores
  // (stored_weights, filled in by the caller from the file).
  std::string cpu_weights = "auto";
  std::string stored_weights = "fp32";
  std::string cpu_isa = "auto";  // auto, avx2 or avx512
};

// INVALID_ARGUMENT for an unknown name, weight type or instruction set;
// FAILED_PRECONDITION when "cuda" finds no usable device or the build has no
// CUDA backend, or the processor lacks the instruction set asked for.
absl::StatusOr<std::unique_ptr<Backend>> ChooseBackend(
    const BackendChoice& choice);

}  // namespace seqboat

#endif  // SEQBOAT_SERVER_BACKEND_CHOICE_H_
