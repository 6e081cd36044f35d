// Decode tokens/s of a canonical model on the CUDA backend at several batch
// sizes, next to the memory-bandwidth roofline of the same step: the bytes a
// step must move (every weight once, each sequence's state read and written,
// the logits written) over the device's measured copy bandwidth.
//
//   bazel run //bench:cuda_decode_bench -- --model_dir=DIR
//       [--batches=1,16,64,256] [--weights=bf16] [--graphs=true]
//       [--early_launch=true]
//       [--mixed_chunk=64]
// With --mixed_chunk, each row also gives a mixed step's time (the batch's
// decode rows and a prompt chunk): split into a replayed pass of the decode
// rows and an eager one of the chunk, and in one eager pass.
//   bench/gpu_decode_bench.py writes the 130M Mamba and hybrid models
//   and runs this on both.
//
// Only the decode steps run inside cudaProfilerStart/Stop, so that
// `ncu --profile-from-start off` sees those kernels and not the prefill's.
#include <cuda_profiler_api.h>
#include <cuda_runtime_api.h>

#include <algorithm>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_split.h"
#include "bench/bench_util.h"
#include "engine/model/model.h"
#include "kernels/cuda/cuda_backend.h"

ABSL_FLAG(std::string, model_dir, "", "canonical model directory");
ABSL_FLAG(std::string, label, "", "name printed with the results");
ABSL_FLAG(std::string, batches, "1,16,64,256", "decode batch sizes");
ABSL_FLAG(int, steps, 30, "timed decode steps per figure (median)");
ABSL_FLAG(std::string, weights, "bf16", "bf16, fp16, fp32 or fp8");
ABSL_FLAG(bool, graphs, true, "record decode steps as CUDA graphs");
ABSL_FLAG(bool, early_launch, true,
          "launch the kernels early (programmatic dependent launch)");
ABSL_FLAG(int, mixed_chunk, 64,
          "also time a mixed step (the batch's decode rows and a prompt chunk "
          "of this many tokens), split and in one pass; 0: no");

namespace seqboat {
namespace {

// Device-to-device copy bandwidth in GB/s (bytes read + written per second),
// the median of several 1 GiB copies: what a bandwidth-bound kernel can reach.
double CopyBandwidth() {
  const size_t bytes = size_t{1} << 30;
  void *a = nullptr, *b = nullptr;
  if (cudaMalloc(&a, bytes) != cudaSuccess ||
      cudaMalloc(&b, bytes) != cudaSuccess) {
    std::fprintf(stderr, "cannot allocate 2 GiB for the bandwidth probe\n");
    std::exit(1);
  }
  cudaEvent_t start, stop;
  cudaEventCreate(&start);
  cudaEventCreate(&stop);
  std::vector<double> gbps;
  for (int i = 0; i < 7; ++i) {
    cudaEventRecord(start);
    cudaMemcpy(b, a, bytes, cudaMemcpyDeviceToDevice);
    cudaEventRecord(stop);
    cudaEventSynchronize(stop);
    float ms = 0;
    cudaEventElapsedTime(&ms, start, stop);
    if (i > 0) gbps.push_back(2.0 * bytes / (ms * 1e-3) / 1e9);
  }
  cudaFree(a);
  cudaFree(b);
  return bench::Median(gbps);
}

struct Loaded {
  std::unique_ptr<Backend> backend;
  std::unique_ptr<Model> model;
};

// A backend and the model on it for batch `b` (and a chunk of `chunk` rows
// on a slot of its own), splitting mixed steps from `split_rows` one-row
// segments (0: never). Null model, with the error printed, on failure.
Loaded Load(CudaWeights weights, int b, int chunk, int split_rows) {
  Loaded out;
  CudaBackendOptions o;
  o.weights = weights;
  o.graphs = absl::GetFlag(FLAGS_graphs);
  o.early_launch = absl::GetFlag(FLAGS_early_launch);
  auto backend = MakeCudaBackend(o);
  if (!backend.ok()) {
    std::fprintf(stderr, "%s\n", backend.status().ToString().c_str());
    return out;
  }
  out.backend = *std::move(backend);
  ModelLimits limits;
  limits.max_slots = b + (chunk > 0 ? 1 : 0);
  // The batch's own buckets: the chunk's slot adds none.
  limits.decode_buckets = out.backend->CaptureBuckets(b);
  limits.max_rows_per_step = std::max(b, 64) + chunk;
  limits.mixed_step_graph_rows = split_rows;
  auto model =
      Model::Load(absl::GetFlag(FLAGS_model_dir), *out.backend, limits);
  if (!model.ok()) {
    std::fprintf(stderr, "%s\n", model.status().ToString().c_str());
    return out;
  }
  out.model = *std::move(model);
  return out;
}

int Run() {
  std::vector<int> batches;
  for (absl::string_view p :
       absl::StrSplit(absl::GetFlag(FLAGS_batches), ',')) {
    int b;
    if (absl::SimpleAtoi(p, &b) && b > 0) batches.push_back(b);
  }
  if (batches.empty()) return 2;
  auto weights = ParseCudaWeights(absl::GetFlag(FLAGS_weights));
  if (!weights.ok()) {
    std::fprintf(stderr, "%s\n", weights.status().ToString().c_str());
    return 2;
  }
  const double bw = CopyBandwidth();
  const std::string label = absl::GetFlag(FLAGS_label);
  std::printf(
      "%s: copy bandwidth %.0f GB/s, weights %s, graphs %s, early launches "
      "%s\n",
      label.c_str(), bw, absl::GetFlag(FLAGS_weights).c_str(),
      absl::GetFlag(FLAGS_graphs) ? "on" : "off",
      absl::GetFlag(FLAGS_early_launch) ? "on" : "off");
  const int chunk = std::max(0, absl::GetFlag(FLAGS_mixed_chunk));
  std::printf("%6s %10s %9s %12s %12s %9s", "batch", "tok/s", "step ms",
              "MB/step", "roofline ms", "of roof");
  if (chunk > 0) {
    std::printf(" %13s %13s", "mixed split", "mixed 1 pass");
  }
  std::printf("\n");
  for (int b : batches) {
    // Split: every mixed step, whatever its decode rows (the threshold
    // these figures are for); one pass: none.
    auto split = Load(*weights, b, chunk, 1);
    if (!split.model) return 1;
    Model& model = *split.model;
    std::vector<int> slots;
    for (int i = 0; i < b; ++i) {
      slots.push_back(*model.arena().Acquire());
      bench::Prefill(model, slots.back(), 16, 16);
    }
    cudaProfilerStart();
    const double step =
        bench::DecodeStepSeconds(model, slots, absl::GetFlag(FLAGS_steps));
    cudaProfilerStop();
    const double bytes = static_cast<double>(split.backend->WeightBytes()) +
                         2.0 * b * model.arena().bytes_per_slot() +
                         4.0 * b * model.vocab_size();
    const double roof = bytes / (bw * 1e9);
    std::printf("%6d %10.1f %9.3f %12.1f %12.4f %8.1f%%", b, b / step,
                step * 1e3, bytes / 1e6, roof * 1e3, 100.0 * roof / step);
    if (chunk > 0) {
      const double mixed = bench::MixedStepSeconds(model, slots, chunk,
                                                   absl::GetFlag(FLAGS_steps));
      split.model.reset();  // before its backend
      split.backend.reset();
      auto one = Load(*weights, b, chunk, 0);
      if (!one.model) return 1;
      std::vector<int> one_slots;
      for (int i = 0; i < b; ++i) {
        one_slots.push_back(*one.model->arena().Acquire());
        bench::Prefill(*one.model, one_slots.back(), 16, 16);
      }
      const double unsplit = bench::MixedStepSeconds(
          *one.model, one_slots, chunk, absl::GetFlag(FLAGS_steps));
      std::printf(" %10.3f ms %10.3f ms", mixed * 1e3, unsplit * 1e3);
    }
    std::printf("\n");
    std::fflush(stdout);
  }
  return 0;
}

}  // namespace
}  // namespace seqboat

int main(int argc, char** argv) {
  absl::ParseCommandLine(argc, argv);
  return seqboat::Run();
}
