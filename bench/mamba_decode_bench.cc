// Decode throughput of the CPU backend on the 130M Mamba shape (random
// weights), per batch size and weight type, printed next to this machine's
// limits measured in the same run: the GEMM rate at the step's exact shapes
// (the backend's own kernel, and OpenBLAS's sgemm measured in a child
// process so that the two thread pools never fight), the share of the step
// outside those GEMMs (each step timed beside a pass of them), the memory
// bandwidth and the bound it puts on a step that reads every weight once.
// Then prefill, and each weight type's logits against fp32's (teacher-forced:
// max logit error, argmax agreement). --kind=mamba2 runs
// state-spaces/mamba2-130m's shape instead (d_model 768, 24 layers, head_dim
// 64, d_state 128); --kind=qwen3_5 Qwen3.5-0.8B's (18 Gated DeltaNet and 6
// gated attention layers, d_model 1024, vocabulary 248320; the attention
// caches 4 + 2044 keys). The bandwidth bound counts every weight and twice
// each sequence's whole state (attention caches in full), so with attention
// it is the bound of a full cache.
//
//   bazel run -c opt //bench:mamba_decode_bench --
//   [--kind=mamba1|mamba2|qwen3_5] [--batches=1,8,32,128]
//   [--weights=fp32,bf16,int8] [--isa=auto|avx2|avx512]
#include <cblas.h>
#include <omp.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <map>
#include <memory>
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
#include "engine/layers/attention.h"
#include "engine/layers/gdn.h"
#include "engine/layers/mamba1.h"
#include "engine/layers/mamba2.h"
#include "engine/layers/mlp.h"
#include "engine/model/config.h"
#include "engine/model/model.h"
#include "kernels/cpu/cpu_backend.h"
#include "kernels/cpu/packed_matrix.h"

ABSL_FLAG(std::string, model_dir, "",
          "existing canonical model; empty makes the 130M shape");
ABSL_FLAG(std::string, kind, "mamba1",
          "mamba1 or mamba2: which 130M shape to make");
ABSL_FLAG(std::string, scratch_dir, "/tmp/seqboat-bench-mamba130m",
          "where the random model goes (with -mamba2 appended for mamba2)");
ABSL_FLAG(std::string, batches, "1,8,32,128", "decode batch sizes");
ABSL_FLAG(std::string, weights, "fp32,bf16,int8",
          "CPU weight types to run (fp32, bf16, fp16, int8)");
ABSL_FLAG(std::string, isa, "auto", "CPU instruction set: auto, avx2, avx512");
ABSL_FLAG(int, accuracy_tokens, 48,
          "teacher-forced tokens for the logit comparison with fp32 (0 skips)");
ABSL_FLAG(bool, blas_child, false,
          "internal: measure OpenBLAS at --batches and print the rates");
ABSL_FLAG(int, steps, 15,
          "timed decode steps per batch size (in rounds of three, each round "
          "beside one pass of the GEMMs alone)");
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
    if (const GdnConfig* g = b.As<GdnConfig>()) {
      s.mats.push_back({static_cast<int>(g->proj_rows()), d});
      s.mats.push_back({d, static_cast<int>(g->value_dim())});
      continue;
    }
    if (const AttentionConfig* a = b.As<AttentionConfig>()) {
      const int qd = static_cast<int>(a->n_heads * a->head_dim),
                kd = static_cast<int>(a->n_kv_heads * a->head_dim);
      s.mats.push_back({qd, d});
      if (a->out_gate) s.mats.push_back({qd, d});
      s.mats.push_back({kd, d});
      s.mats.push_back({kd, d});
      s.mats.push_back({d, qd});
      continue;
    }
    if (const MlpConfig* m = b.As<MlpConfig>()) {
      const int f = static_cast<int>(m->d_ff);
      s.mats.push_back({f, d});
      if (m->gated) s.mats.push_back({f, d});
      s.mats.push_back({d, f});
      continue;
    }
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

// The step's matrices in a backend's weight type (null backend: fp32 on the
// host for OpenBLAS), each once, with x and y buffers for batch max_b.
struct GemmSet {
  Backend* be = nullptr;
  std::vector<std::vector<float>> host;
  std::vector<Matrix> mats;
  std::vector<float> x, y;
};

GemmSet MakeGemmSet(Backend* be, const StepShapes& shapes, int max_b) {
  GemmSet g;
  g.be = be;
  size_t max_cols = 0, max_rows = 0;
  for (auto [rows, cols] : shapes.mats) {
    std::vector<float> w(static_cast<size_t>(rows) * cols, 0.01f);
    if (be != nullptr) {
      auto m = be->UploadMatrix(w.data(), rows, cols);
      if (!m.ok()) {
        std::fprintf(stderr, "%s\n", m.status().ToString().c_str());
        std::exit(1);
      }
      g.mats.push_back(*m);
      w = {};  // the backend keeps its own packed copy
    }
    g.host.push_back(std::move(w));
    max_cols = std::max<size_t>(max_cols, cols);
    max_rows = std::max<size_t>(max_rows, rows);
  }
  g.x.assign(max_b * max_cols, 0.5f);
  g.y.resize(max_b * max_rows);
  return g;
}

// Seconds of one pass over the step's GEMMs at batch b: through the
// backend's GEMM (its own kernel, on matrices in its weight type) or
// OpenBLAS's sgemm.
double GemmPassSeconds(GemmSet& g, const StepShapes& shapes, int b) {
  const auto a = Clock::now();
  for (size_t i = 0; i < shapes.mats.size(); ++i) {
    const int rows = shapes.mats[i].first, cols = shapes.mats[i].second;
    if (g.be == nullptr) {
      cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, b, rows, cols, 1.0f,
                  g.x.data(), cols, g.host[i].data(), cols, 0.0f, g.y.data(),
                  rows);
    } else {
      GemmParams mats2;
      mats2.x = g.x.data();
      mats2.ldx = cols;
      mats2.n = b;
      mats2.w = g.mats[i];
      mats2.y = g.y.data();
      mats2.ldy = rows;
      g.be->Gemm(mats2);
    }
  }
  return Seconds(a, Clock::now());
}

std::vector<int> Batches() {
  std::vector<int> batches;
  for (absl::string_view p :
       absl::StrSplit(absl::GetFlag(FLAGS_batches), ',')) {
    int b;
    if (absl::SimpleAtoi(p, &b) && b > 0) batches.push_back(b);
  }
  return batches;
}

// The child's side: OpenBLAS alone in its process, rates on stdout.
int BlasChild(const std::string& dir) {
  auto cfg = LoadModelConfig(dir + "/config.json");
  if (!cfg.ok()) return 1;
  const StepShapes shapes = ShapesOf(*cfg);
  const std::vector<int> batches = Batches();
  GemmSet g = MakeGemmSet(nullptr, shapes,
                          *std::max_element(batches.begin(), batches.end()));
  for (int b : batches) {
    std::vector<double> t;
    for (int rep = 0; rep < 7; ++rep)
      t.push_back(GemmPassSeconds(g, shapes, b));
    std::printf("%d %.3f\n", b, shapes.flops_per_token * b / Median(t) / 1e9);
  }
  return 0;
}

// OpenBLAS's rate per batch size, from a child process of this binary.
std::map<int, double> BlasRates(const std::string& dir) {
  std::map<int, double> out;
  // popen runs a shell, whose /proc/self/exe is the shell: resolve it here.
  char self[4096] = {};
  if (readlink("/proc/self/exe", self, sizeof(self) - 1) <= 0) return out;
  const std::string cmd = std::string(self) + " --blas_child --model_dir='" +
                          dir + "' --batches=" + absl::GetFlag(FLAGS_batches);
  FILE* p = popen(cmd.c_str(), "r");
  if (p == nullptr) return out;
  int b;
  double rate;
  while (std::fscanf(p, "%d %lf", &b, &rate) == 2) out[b] = rate;
  pclose(p);
  return out;
}

// Logits of every position of `tokens` fed one decode step at a time.
std::vector<float> TeacherForcedLogits(Model& model, int slot,
                                       const std::vector<int32_t>& tokens) {
  const int64_t v = model.vocab_size();
  std::vector<float> out(tokens.size() * v);
  for (size_t t = 0; t < tokens.size(); ++t) {
    const StepRows one{{tokens[t]}, {{slot, 0, 1}}, {0}};
    if (!model.Forward(one, out.data() + t * v).ok()) {
      std::exit(1);
    }
  }
  return out;
}

int Run() {
  const std::vector<int> batches = Batches();
  if (batches.empty()) return 1;
  if (absl::GetFlag(FLAGS_blas_child)) {
    return BlasChild(absl::GetFlag(FLAGS_model_dir));
  }
  const int max_b = *std::max_element(batches.begin(), batches.end());
  std::string dir = absl::GetFlag(FLAGS_model_dir);
  if (dir.empty()) {
    const std::string kind = absl::GetFlag(FLAGS_kind);
    if (kind != "mamba1" && kind != "mamba2" && kind != "qwen3_5") {
      std::fprintf(stderr, "--kind must be mamba1, mamba2 or qwen3_5, got %s\n",
                   kind.c_str());
      return 1;
    }
    const bool two = kind == "mamba2", qwen = kind == "qwen3_5";
    dir = absl::GetFlag(FLAGS_scratch_dir) + (two    ? "-mamba2"
                                              : qwen ? "-qwen3.5-0.8b"
                                                     : "");
    std::printf("writing a random %s to %s ...\n",
                two    ? "130M-shape Mamba-2"
                : qwen ? "Qwen3.5-0.8B-shape model"
                       : "130M-shape Mamba",
                dir.c_str());
    if (absl::Status s = two    ? WriteRandomMamba2({}, dir)
                         : qwen ? WriteRandomQwen35({}, dir)
                                : WriteRandomMamba({}, dir);
        !s.ok()) {
      std::fprintf(stderr, "%s\n", s.ToString().c_str());
      return 1;
    }
  }
  // OpenBLAS first, alone: its threads spin after each call.
  const std::map<int, double> blas = BlasRates(dir);
  const double bw = MeasureReadBandwidth();
  std::printf("memory read bandwidth: %.2f GB/s, threads %d\n", bw,
              omp_get_max_threads());

  const int chunk = absl::GetFlag(FLAGS_prefill_chunk);
  const int steps = absl::GetFlag(FLAGS_steps);
  const int acc_tokens = absl::GetFlag(FLAGS_accuracy_tokens);
  std::vector<int32_t> acc_ids(acc_tokens);
  for (int i = 0; i < acc_tokens; ++i) acc_ids[i] = (i * 7919 + 11) % 256;
  std::vector<float> fp32_logits;
  bool first = true;
  for (const std::string& type : std::vector<std::string>(
           absl::StrSplit(absl::GetFlag(FLAGS_weights), ','))) {
    CpuBackendOptions opt;
    opt.weights = type;
    opt.isa = absl::GetFlag(FLAGS_isa);
    auto made = MakeCpuBackend(opt);
    if (!made.ok()) {
      std::fprintf(stderr, "%s\n", made.status().ToString().c_str());
      return 1;
    }
    std::unique_ptr<Backend> backend = *std::move(made);
    auto loaded =
        Model::Load(dir, *backend, {max_b + 1, std::max(chunk, max_b)});
    if (!loaded.ok()) {
      std::fprintf(stderr, "%s\n", loaded.status().ToString().c_str());
      return 1;
    }
    Model& model = **loaded;
    const StepShapes shapes = ShapesOf(model.config());
    const double state_bytes =
        static_cast<double>(model.arena().bytes_per_slot());
    // What one step must read: the matrices in their type (WeightBytes also
    // counts the embedding, which a step reads a row of: left out).
    // (The backend was made, so the type parses.)
    const double elem = cpu::ElementBytes(*cpu::ParseWeightType(type));
    const double weight_bytes = shapes.weight_bytes / 4.0 * elem;
    std::printf(
        "\n== %s weights on %s: %zu blocks, d_model %lld, vocab %lld, "
        "%.1f M matrix params, %.3f GFLOP/token, backend holds %.0f MB of "
        "weights, state %.1f KiB/sequence\n",
        type.c_str(), backend->DeviceName().c_str(), model.layers().size(),
        static_cast<long long>(model.config().d_model),
        static_cast<long long>(model.config().vocab_size),
        shapes.weight_bytes / 4e6, shapes.flops_per_token / 1e9,
        backend->WeightBytes() / 1e6, state_bytes / 1024);
    std::printf("%6s %9s %9s %10s %10s %10s %8s %9s %10s %8s\n", "batch",
                "tok/s", "step ms", "step GF/s", "own GF/s", "BLAS GF/s",
                "of GEMM", "non-GEMM", "BW tok/s", "of BW");
    std::vector<int> slots;
    for (int i = 0; i < max_b; ++i) slots.push_back(*model.arena().Acquire());
    GemmSet own_set = MakeGemmSet(backend.get(), shapes, max_b);
    for (int b : batches) {
      const std::vector<int> use(slots.begin(), slots.begin() + b);
      // Rounds of a few decode steps, then one pass of the same GEMMs alone:
      // the step and its GEMM-limited time are sampled side by side, so a
      // shared host's slow spells touch both, and each figure is the median
      // over the rounds.
      const double blas_rate = blas.count(b) ? blas.at(b) : 0.0;
      const double blas_s =
          blas_rate > 0 ? shapes.flops_per_token * b / (blas_rate * 1e9) : 1e30;
      std::vector<double> step_t, gemm_t, of_best, outside;
      const int rounds = std::max(3, (steps + 2) / 3);
      for (int r = 0; r < rounds; ++r) {
        step_t.push_back(DecodeStepSeconds(model, use, 3));
        gemm_t.push_back(GemmPassSeconds(own_set, shapes, b));
        of_best.push_back(std::min(gemm_t.back(), blas_s) / step_t.back());
        outside.push_back(std::max(0.0, 1 - gemm_t.back() / step_t.back()));
      }
      const double step = Median(step_t);
      const double tps = b / step;
      const double own = shapes.flops_per_token * b / Median(gemm_t) / 1e9;
      const double achieved = tps * shapes.flops_per_token / 1e9;
      const double bw_bound =
          bw * 1e9 / (weight_bytes + 2.0 * state_bytes * b) * b;
      std::printf(
          "%6d %9.1f %9.2f %10.1f %10.1f %10.1f %7.0f%% %8.0f%% %10.1f "
          "%7.0f%%\n",
          b, tps, step * 1e3, achieved, own, blas_rate, 100 * Median(of_best),
          100 * Median(outside), bw_bound, 100 * tps / bw_bound);
    }
    for (int s : slots) model.arena().Release(s);

    const int prefill = absl::GetFlag(FLAGS_prefill_tokens);
    const int fresh = *model.arena().Acquire();
    const double pt = Prefill(model, fresh, prefill, chunk);
    std::printf("prefill: %d tokens in chunks of %d: %.1f tok/s\n", prefill,
                chunk, prefill / pt);
    model.arena().Release(fresh);

    if (acc_tokens > 0) {
      const int s = *model.arena().Acquire();
      std::vector<float> logits = TeacherForcedLogits(model, s, acc_ids);
      model.arena().Release(s);
      if (type == "fp32") {
        fp32_logits = std::move(logits);
      } else if (!fp32_logits.empty()) {
        const int64_t v = model.vocab_size();
        double max_err = 0, max_abs = 0;
        int agree = 0;
        for (int t = 0; t < acc_tokens; ++t) {
          const float* a = fp32_logits.data() + t * v;
          const float* q = logits.data() + t * v;
          for (int64_t j = 0; j < v; ++j) {
            max_err = std::max(max_err, double(std::fabs(a[j] - q[j])));
            max_abs = std::max(max_abs, double(std::fabs(a[j])));
          }
          agree +=
              std::max_element(a, a + v) - a == std::max_element(q, q + v) - q;
        }
        std::printf(
            "logits vs fp32 over %d teacher-forced tokens: max error "
            "%.4g (largest |logit| %.3g), argmax agrees %d/%d\n",
            acc_tokens, max_err, max_abs, agree, acc_tokens);
      }
    }

    const int long_ctx = absl::GetFlag(FLAGS_long_context);
    if (first && long_ctx > 0) {
      const int s = *model.arena().Acquire();
      Prefill(model, s, 1024, chunk);
      const double at_1k = DecodeStepSeconds(model, {s}, steps);
      std::printf("batch-1 decode at context 1k: %.2f ms/token\n", at_1k * 1e3);
      std::printf("prefilling to %d ...\n", long_ctx);
      Prefill(model, s, long_ctx - 1024 - steps - 2, chunk);
      const double at_long = DecodeStepSeconds(model, {s}, steps);
      std::printf("batch-1 decode at context %dk: %.2f ms/token (ratio %.3f)\n",
                  long_ctx / 1024, at_long * 1e3, at_long / at_1k);
      model.arena().Release(s);
    }
    first = false;
  }
  return 0;
}

}  // namespace
}  // namespace seqboat

int main(int argc, char** argv) {
  absl::ParseCommandLine(argc, argv);
  return seqboat::Run();
}
