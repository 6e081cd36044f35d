// Decode slowdown from constrained decoding, through the engine: a random
// two-layer Mamba (d_model 128) whose vocabulary is a synthetic byte-level
// BPE one of 50k or 248k tokens (bench/synthetic_vocab), on the CPU
// backend, B sequences decoding together at temperature 1. For each
// vocabulary, batch and constraint kind (none, json_object, json_schema):
// the median period of the engine loop at full batch (from one step's end
// to the next's, so sampling, the masks' wait and delivery count), its
// slowdown against the unconstrained run, the filler's time per mask (off
// the engine thread, overlapping the forward) and the engine thread's wait
// for masks per step (what the masks added to the step).
//
//   bazel run -c opt //bench:constrained_decode_bench -- \
//       [--vocabs=50000,248000] [--batches=1,64] [--tokens=24] [--threads=2]
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <future>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_split.h"
#include "bench/random_model.h"
#include "bench/synthetic_vocab.h"
#include "engine/engine.h"
#include "kernels/cpu/cpu_backend.h"

ABSL_FLAG(std::string, vocabs, "50000,248000", "vocabulary sizes");
ABSL_FLAG(std::string, batches, "1,64", "sequences decoding together");
ABSL_FLAG(int, tokens, 24, "tokens each sequence generates");
ABSL_FLAG(int, threads, 2, "CPU backend threads");

namespace seqboat::bench {
namespace {

using Clock = std::chrono::steady_clock;

constexpr char kSchema[] = R"({"type": "object",
  "properties": {"name": {"type": "string"}, "age": {"type": "integer"},
                 "tags": {"type": "array", "items": {"type": "string"}}},
  "required": ["name", "age", "tags"]})";

std::vector<int> Ints(const std::string& list) {
  std::vector<int> out;
  for (absl::string_view s : absl::StrSplit(list, ',')) {
    int v = 0;
    if (absl::SimpleAtoi(s, &v)) out.push_back(v);
  }
  return out;
}

struct Result {
  double period_ms = 0;  // median loop period at full batch
  int periods = 0;
  double mask_us = 0;       // filler time per mask
  double wait_us = 0;       // engine thread's wait per step
  double tokens_per_s = 0;  // over the whole run
};

Result RunOnce(const std::string& dir, int batch, const char* kind) {
  std::mutex mu;
  std::vector<std::pair<Clock::time_point, int32_t>> steps;
  EngineOptions o;
  o.model_dir = dir;
  o.max_slots = batch;
  o.step_token_budget = 1024;
  o.on_step = [&](absl::Duration, int32_t b) {
    std::lock_guard<std::mutex> lock(mu);
    steps.push_back({Clock::now(), b});
  };
  auto engine = Engine::Create(o, MakeCpuBackend(absl::GetFlag(FLAGS_threads)));
  if (!engine.ok()) {
    std::fprintf(stderr, "%s\n", engine.status().ToString().c_str());
    std::exit(1);
  }
  const int tokens = absl::GetFlag(FLAGS_tokens);
  std::vector<std::promise<void>> done(batch);
  const auto start = Clock::now();
  for (int i = 0; i < batch; ++i) {
    Request r;
    r.prompt = {300, 301, 302, 303, 304, 305, 306, 307};
    r.sampling.temperature = 1.0f;
    r.sampling.seed = static_cast<uint64_t>(i);
    r.stopping.max_new_tokens = tokens;
    // The whole length at full batch: stops are held back while the
    // constraint allows anything else.
    r.stopping.min_new_tokens = tokens;
    r.stopping.ignore_eos = true;
    if (std::string(kind) == "json_object") {
      r.constraint = Constraint{ConstraintKind::kAnyJson, "", {}};
    } else if (std::string(kind) == "json_schema") {
      r.constraint = Constraint{ConstraintKind::kJsonSchema, kSchema, {}};
    }
    r.sink = [&done, i](GenerationEvent e) {
      if (e.finish != FinishReason::kNone || !e.status.ok())
        done[i].set_value();
    };
    if (absl::Status s = (*engine)->Submit(std::move(r)); !s.ok()) {
      std::fprintf(stderr, "%s\n", s.ToString().c_str());
      std::exit(1);
    }
  }
  for (auto& d : done) d.get_future().wait();
  const double seconds =
      std::chrono::duration<double>(Clock::now() - start).count();
  const EngineStats stats = (*engine)->Stats();
  (*engine)->Shutdown();
  Result r;
  std::vector<double> periods;
  for (size_t i = 1; i < steps.size(); ++i) {
    if (steps[i].second == batch && steps[i - 1].second == batch) {
      periods.push_back(std::chrono::duration<double, std::milli>(
                            steps[i].first - steps[i - 1].first)
                            .count());
    }
  }
  std::sort(periods.begin(), periods.end());
  r.periods = static_cast<int>(periods.size());
  if (!periods.empty()) r.period_ms = periods[periods.size() / 2];
  if (stats.grammar_masks > 0) {
    r.mask_us = 1e-3 * static_cast<double>(stats.grammar_mask_ns) /
                static_cast<double>(stats.grammar_masks);
  }
  if (stats.steps > 0) {
    r.wait_us = 1e-3 * static_cast<double>(stats.grammar_mask_wait_ns) /
                static_cast<double>(stats.steps);
  }
  r.tokens_per_s = batch * tokens / seconds;
  return r;
}

int Main() {
  std::printf(
      "vocab  batch  constraint   loop ms (n)    slowdown  mask us/token  "
      "wait us/step  tok/s\n");
  for (int vocab : Ints(absl::GetFlag(FLAGS_vocabs))) {
    const std::string dir =
        "/tmp/seqboat-bench-constrained-" + std::to_string(vocab);
    std::filesystem::create_directories(dir);
    RandomMambaShape shape;
    shape.d_model = 128;
    shape.n_layers = 2;
    shape.vocab = vocab;
    if (absl::Status s = WriteRandomMamba(shape, dir); !s.ok()) {
      std::fprintf(stderr, "%s\n", s.ToString().c_str());
      return 1;
    }
    // The byte tokenizer WriteRandomMamba wrote gives way to the synthetic
    // vocabulary (EOS at 256 in both).
    std::ofstream(dir + "/tokenizer.json")
        << SyntheticTokenizerJson(Synthetic(vocab));
    for (int batch : Ints(absl::GetFlag(FLAGS_batches))) {
      double base = 0;
      for (const char* kind : {"none", "json_object", "json_schema"}) {
        const Result r = RunOnce(dir, batch, kind);
        if (std::string(kind) == "none") base = r.period_ms;
        std::printf(
            "%6d %6d  %-11s %8.2f (%3d)  %+7.1f %%  %13.1f  %12.1f  %6.0f\n",
            vocab, batch, kind, r.period_ms, r.periods,
            base > 0 ? 100.0 * (r.period_ms / base - 1.0) : 0.0, r.mask_us,
            r.wait_us, r.tokens_per_s);
        std::fflush(stdout);
      }
    }
  }
  return 0;
}

}  // namespace
}  // namespace seqboat::bench

int main(int argc, char** argv) {
  absl::ParseCommandLine(argc, argv);
  return seqboat::bench::Main();
}
