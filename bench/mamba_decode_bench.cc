// Decode throughput of the CPU backend on the 130M Mamba shape (random
// weights), printed next to this machine's limits measured in the same run:
// the BLAS GEMM rate at the step's exact shapes and the memory bandwidth.
// --kind=mamba2 runs state-spaces/mamba2-130m's shape instead (d_model 768,
// 24 layers, head_dim 64, d_state 128), whose state per sequence is ~7x
// Mamba-1's.
//
//   bazel run -c opt //bench:mamba_decode_bench --
//   [--kind=mamba1|mamba2] [--batches=1,8,32,128]
#include <cblas.h>
#include <omp.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_split.h"
#include "bench/bench_util.h"
#include "bench/random_model.h"
#include "engine/cpu/cpu_backend.h"
#include "engine/layers/mamba1.h"
#include "engine/layers/mamba2.h"
#include "engine/model/model.h"

ABSL_FLAG(std::string, model_dir, "",
          "existing canonical model; empty makes the 130M shape");
ABSL_FLAG(std::string, kind, "mamba1",
          "mamba1 or mamba2: which 130M shape to make");
ABSL_FLAG(std::string, scratch_dir, "/tmp/seqboat-bench-mamba130m",
          "where the random model goes (with -mamba2 appended for mamba2)");
ABSL_FLAG(std::string, batches, "1,8,32,128", "decode batch sizes");
ABSL_FLAG(int, steps, 12, "timed decode steps per batch size");
ABSL_FLAG(int, prefill_tokens, 2048, "prompt length for the prefill figure");
ABSL_FLAG(int, prefill_chunk, 512, "prefill chunk (rows per step)");
ABSL_FLAG(int, long_context, 65536,
          "context position for the flatness figure (0 skips)");

namespace seqboat {
namespace {

using bench::Clock;
using bench::DecodeStepSeconds;
using bench::MeasureReadBandwidth;
using bench::Median;
using bench::Prefill;
using bench::Seconds;

struct StepShapes {
  std::vector<std::pair<int, int>>
      mats;  // rows x cols of every GEMM in one step
  double flops_per_token = 0;
  double weight_bytes = 0;
};

StepShapes ShapesOf(const ModelConfig& cfg) {
  StepShapes s;
  const int d = static_cast<int>(cfg.d_model);
  for (const BlockConfig& b : cfg.blocks) {
    if (const Mamba2Config* m2 = b.As<Mamba2Config>()) {
      const int e = static_cast<int>(m2->d_inner());
      s.mats.push_back({static_cast<int>(m2->in_proj_rows()), d});
      s.mats.push_back({d, e});
      continue;
    }
    const Mamba1Config* m = b.As<Mamba1Config>();
    const int e = m->d_inner, r = m->dt_rank, n = m->d_state;
    s.mats.push_back({2 * e, d});
    s.mats.push_back({r + 2 * n, e});
    s.mats.push_back({e, r});
    s.mats.push_back({d, e});
  }
  s.mats.push_back({static_cast<int>(cfg.vocab_size), d});
  for (auto [rows, cols] : s.mats) {
    s.flops_per_token += 2.0 * rows * cols;
    s.weight_bytes += 4.0 * rows * cols;
  }
  return s;
}

// GFLOP/s of the step's GEMMs alone at batch b, through the backend's GEMM
// (the engine's own kernel) or, for comparison, OpenBLAS's sgemm.
double MeasureGemmRate(Backend& be, const StepShapes& shapes, int b,
                       bool openblas) {
  std::mt19937 rng(1);
  std::vector<std::vector<float>> ws;
  size_t max_cols = 0, max_rows = 0;
  for (auto [rows, cols] : shapes.mats) {
    ws.emplace_back(static_cast<size_t>(rows) * cols, 0.01f);
    max_cols = std::max<size_t>(max_cols, cols);
    max_rows = std::max<size_t>(max_rows, rows);
  }
  std::vector<float> x(b * max_cols, 0.5f), y(b * max_rows);
  std::vector<double> t;
  for (int rep = 0; rep < 7; ++rep) {
    const auto a = Clock::now();
    for (size_t i = 0; i < ws.size(); ++i) {
      Matrix m{ws[i].data(), shapes.mats[i].first, shapes.mats[i].second};
      const int rows = static_cast<int>(m.rows),
                cols = static_cast<int>(m.cols);
      if (openblas) {
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, b, rows, cols,
                    1.0f, x.data(), cols, ws[i].data(), cols, 0.0f, y.data(),
                    rows);
      } else {
        be.Gemm(x.data(), cols, b, m, nullptr, y.data(), rows, false);
      }
    }
    t.push_back(Seconds(a, Clock::now()));
  }
  return shapes.flops_per_token * b / Median(t) / 1e9;
}

int Run() {
  std::vector<int> batches;
  for (absl::string_view p :
       absl::StrSplit(absl::GetFlag(FLAGS_batches), ',')) {
    int b;
    if (absl::SimpleAtoi(p, &b) && b > 0) batches.push_back(b);
  }
  const int max_b = *std::max_element(batches.begin(), batches.end());
  std::string dir = absl::GetFlag(FLAGS_model_dir);
  if (dir.empty()) {
    const std::string kind = absl::GetFlag(FLAGS_kind);
    if (kind != "mamba1" && kind != "mamba2") {
      std::fprintf(stderr, "--kind must be mamba1 or mamba2, got %s\n",
                   kind.c_str());
      return 1;
    }
    const bool two = kind == "mamba2";
    dir = absl::GetFlag(FLAGS_scratch_dir) + (two ? "-mamba2" : "");
    std::printf("writing a random 130M-shape %s to %s ...\n",
                two ? "Mamba-2" : "Mamba", dir.c_str());
    if (absl::Status s =
            two ? WriteRandomMamba2({}, dir) : WriteRandomMamba({}, dir);
        !s.ok()) {
      std::fprintf(stderr, "%s\n", s.ToString().c_str());
      return 1;
    }
  }
  auto backend = MakeCpuBackend();
  const int chunk = absl::GetFlag(FLAGS_prefill_chunk);
  auto loaded = Model::Load(dir, *backend, {max_b + 1, std::max(chunk, max_b)});
  if (!loaded.ok()) {
    std::fprintf(stderr, "%s\n", loaded.status().ToString().c_str());
    return 1;
  }
  Model& model = **loaded;
  const StepShapes shapes = ShapesOf(model.config());
  const double state_bytes =
      static_cast<double>(model.arena().bytes_per_slot());
  std::printf(
      "model: %zu blocks, d_model %lld, vocab %lld, %.1f M matrix params, "
      "%.3f GFLOP/token, state %.1f KiB/sequence, threads %d\n",
      model.layers().size(), static_cast<long long>(model.config().d_model),
      static_cast<long long>(model.config().vocab_size),
      shapes.weight_bytes / 4e6, shapes.flops_per_token / 1e9,
      state_bytes / 1024, omp_get_max_threads());

  const double bw = MeasureReadBandwidth();
  std::printf("memory read bandwidth: %.2f GB/s\n\n", bw);

  std::vector<int> slots;
  for (int i = 0; i < max_b; ++i) slots.push_back(*model.arena().Acquire());
  std::printf("%6s %10s %10s %14s %15s %9s %12s\n", "batch", "tok/s", "step ms",
              "GEMM GFLOP/s", "OpenBLAS GF/s", "of GEMM", "of BW bound");
  const int steps = absl::GetFlag(FLAGS_steps);
  for (int b : batches) {
    const std::vector<int> use(slots.begin(), slots.begin() + b);
    const double step = DecodeStepSeconds(model, use, steps);
    const double tps = b / step;
    const double gemm = MeasureGemmRate(*backend, shapes, b, false);
    const double blas = MeasureGemmRate(*backend, shapes, b, true);
    const double achieved = tps * shapes.flops_per_token / 1e9;
    // Bytes a step must move: every weight once, plus each sequence's state
    // read and written.
    const double bytes = shapes.weight_bytes + 2.0 * state_bytes * b;
    const double bw_bound = bw * 1e9 / bytes * b;
    std::printf("%6d %10.1f %10.2f %14.1f %15.1f %8.0f%% %11.0f%%\n", b, tps,
                step * 1e3, gemm, blas, 100 * achieved / gemm,
                100 * tps / bw_bound);
  }

  const int prefill = absl::GetFlag(FLAGS_prefill_tokens);
  const int pslot = slots[0];
  model.arena().Release(pslot);
  const int fresh = *model.arena().Acquire();
  const double pt = Prefill(model, fresh, prefill, chunk);
  std::printf("\nprefill: %d tokens in chunks of %d: %.1f tok/s\n", prefill,
              chunk, prefill / pt);

  const int long_ctx = absl::GetFlag(FLAGS_long_context);
  if (long_ctx > 0) {
    model.arena().Release(fresh);
    const int s = *model.arena().Acquire();
    Prefill(model, s, 1024, chunk);
    const double at_1k = DecodeStepSeconds(model, {s}, steps);
    std::printf("batch-1 decode at context 1k: %.2f ms/token\n", at_1k * 1e3);
    std::printf("prefilling to %d ...\n", long_ctx);
    Prefill(model, s, long_ctx - 1024 - steps - 2, chunk);
    const double at_long = DecodeStepSeconds(model, {s}, steps);
    std::printf("batch-1 decode at context %dk: %.2f ms/token (ratio %.3f)\n",
                long_ctx / 1024, at_long * 1e3, at_long / at_1k);
  }
  return 0;
}

}  // namespace
}  // namespace seqboat

int main(int argc, char** argv) {
  absl::ParseCommandLine(argc, argv);
  return seqboat::Run();
}
