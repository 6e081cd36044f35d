// Decode at batch 1 with and without speculative decoding (prompt lookup, or
// a draft model with --draft_model_dir),
// through the engine on the CPU backend: tokens per second of the decode
// (first token to last, so prefill is left out), and per CPU second of the
// process over the same span (on a machine shared with other work the
// engine's CPU time moves less than the clock), the draft tokens taken per
// draft token offered, and the tokens each step produced, on a repetitive
// workload (the answer repeats the prompt: code edited, a text quoted back)
// and a non-repetitive one, next to this machine's read bandwidth and the
// decode bound it puts on reading every weight once per step. Greedy; the
// outputs with and without speculation are checked to be equal.
//
//   bazel run -c opt //bench:speculative_bench -- [--model_dir=DIR |
//   --shape=mamba130m] [--tokens=256] [--draft_tokens=2,4,6] [--repeats=3]
//   [--batches=1,4,16] [--draft_model_dir=weights/models/mamba-baseline]
//   [--draft_lengths=fixed,adaptive]
//
// Then what a round costs against a plain step, with and without the
// slot's catch-up; last, the threshold --speculative_max_batch=auto would
// find here.
#include <time.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <future>
#include <memory>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_split.h"
#include "bench/bench_util.h"
#include "bench/random_model.h"
#include "engine/engine.h"
#include "engine/model/model.h"
#include "engine/round_threshold.h"
#include "kernels/cpu/cpu_backend.h"

ABSL_FLAG(std::string, model_dir, "weights/models/default",
          "canonical model directory (the bundled model by default)");
ABSL_FLAG(std::string, shape, "",
          "mamba130m: the 130M Mamba shape with random weights instead");
ABSL_FLAG(int32_t, tokens, 256, "tokens generated per request");
ABSL_FLAG(std::string, draft_tokens, "2,4,6", "draft lengths to run");
ABSL_FLAG(int32_t, repeats, 3, "runs per setting (the median is printed)");
ABSL_FLAG(int32_t, threads, 0, "CPU backend threads; 0 = one per core");
ABSL_FLAG(std::string, draft_model_dir, "",
          "draft with this model (the same tokenizer) instead of prompt "
          "lookup; its time is part of each step's");
ABSL_FLAG(std::string, batches, "1",
          "concurrent requests per run (speculation's gain shrinks as the "
          "batch grows and a step stops being bound by reading the weights)");
ABSL_FLAG(std::string, draft_lengths, "fixed,adaptive",
          "fixed: every round drafts the request's count; adaptive: each "
          "sequence's draft length follows its acceptance");

namespace seqboat::bench {
namespace {

// The repetitive workload: a function, then the request to write it again
// with one change, started; the answer copies most of the prompt.
constexpr char kCode[] =
    "def moving_average(values, window):\n"
    "    \"\"\"The mean of each run of `window` values.\"\"\"\n"
    "    if window <= 0:\n"
    "        raise ValueError(\"window must be positive\")\n"
    "    total = sum(values[:window])\n"
    "    out = [total / window]\n"
    "    for i in range(window, len(values)):\n"
    "        total += values[i] - values[i - window]\n"
    "        out.append(total / window)\n"
    "    return out\n\n"
    "# The same function, renamed to rolling_mean:\n\n"
    "def rolling_mean(values, window):\n";
constexpr char kStory[] =
    "The harbour was quiet that morning. A gull circled the mast of the old "
    "ferry while the baker on the corner set out the first loaves, and far "
    "off a bell rang twice for the tide.";

// This process's CPU seconds so far, every thread's: on a machine shared
// with other work, decode tokens per CPU second move less than per second.
double ProcessCpuSeconds() {
  timespec t{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
  return static_cast<double>(t.tv_sec) + 1e-9 * static_cast<double>(t.tv_nsec);
}

struct Run {
  double tok_per_s = 0;         // all sequences together
  double tok_per_cpu_s = 0;     // the same per CPU second
  std::vector<int32_t> tokens;  // the first sequence's
  int64_t drafted = 0, accepted = 0, rounds = 0, steps = 0, generated = 0;
};

// `batch` copies of the request at once.
Run Generate(Engine& engine, const std::vector<int32_t>& prompt, int tokens,
             int k, int batch) {
  struct Collected {
    std::vector<int32_t> tokens;
    Clock::time_point first, last;
    double cpu_first = 0, cpu_last = 0;
    std::promise<void> done;
  };
  std::vector<Collected> cs(static_cast<size_t>(batch));
  const EngineStats before = engine.Stats();
  for (Collected& c : cs) {
    Request r;
    r.prompt = prompt;
    r.sampling.temperature = 0.0f;
    r.stopping.max_new_tokens = tokens;
    r.stopping.ignore_eos = true;
    if (k > 0) {
      r.speculative = {absl::GetFlag(FLAGS_draft_model_dir).empty()
                           ? SpeculativeMethod::kPromptLookup
                           : SpeculativeMethod::kDraftModel,
                       k, 2, 4};
    }
    r.sink = [&c](GenerationEvent e) {
      const Clock::time_point now = Clock::now();
      const double cpu = ProcessCpuSeconds();
      if (c.tokens.empty()) {
        c.first = now;
        c.cpu_first = cpu;
      }
      c.last = now;
      c.cpu_last = cpu;
      c.tokens.insert(c.tokens.end(), e.token_ids.begin(), e.token_ids.end());
      if (e.finish != FinishReason::kNone || !e.status.ok()) c.done.set_value();
    };
    if (absl::Status s = engine.Submit(std::move(r)); !s.ok()) {
      std::fprintf(stderr, "%s\n", s.ToString().c_str());
      std::exit(1);
    }
  }
  // Each sequence's decode rate, summed: the prompts are prefilled one
  // after another, so a window over all of them would count prefill too.
  Run run;
  for (Collected& c : cs) {
    c.done.get_future().wait();
    run.generated += static_cast<int64_t>(c.tokens.size());
    run.tok_per_s +=
        (static_cast<double>(c.tokens.size()) - 1) / Seconds(c.first, c.last);
    run.tok_per_cpu_s +=
        (static_cast<double>(c.tokens.size()) - 1) / (c.cpu_last - c.cpu_first);
  }
  const EngineStats after = engine.Stats();
  run.tokens = cs[0].tokens;
  run.drafted =
      after.speculation.draft_tokens - before.speculation.draft_tokens;
  run.accepted =
      after.speculation.accepted_tokens - before.speculation.accepted_tokens;
  run.rounds = after.speculation.drafts - before.speculation.drafts;
  run.steps = after.steps - before.steps;
  return run;
}

// Median seconds of one step at batch 1: a plain decode (k = 0), or a
// round of a draft of k (the slot copied into the spare, one unfed token in
// the slot unless `catch_up` is false, it and the draft in the spare, k + 1
// logit rows).
double RoundSeconds(Model& model, int k, int steps, bool catch_up = true) {
  SlotArena& arena = model.arena();
  const int slot = *arena.Acquire(), spare = *arena.Acquire();
  std::vector<float> logits(static_cast<size_t>(k + 1) * model.vocab_size());
  std::vector<double> t;
  for (int s = 0; s < steps + 2; ++s) {
    StepRows rows;
    const int32_t id = (s * 7 + 1) % 256;
    if (k == 0) {
      rows = StepRows{{id}, {{slot, 0, 1}}, {0}};
    } else {
      const int32_t from = catch_up ? 1 : 0;
      if (catch_up) {
        rows.ids.push_back(id);
        rows.segs.push_back({slot, 0, 1});
      }
      rows.segs.push_back({spare, from, k + 1});
      for (int i = 0; i <= k; ++i) {
        rows.ids.push_back((id + i * 5) % 256);
        rows.logit_rows.push_back(from + i);
      }
    }
    const auto a = Clock::now();
    if (k > 0) arena.CopySlot(spare, slot);
    if (absl::Status st = model.Forward(rows, logits.data()); !st.ok()) {
      std::fprintf(stderr, "%s\n", st.ToString().c_str());
      std::exit(1);
    }
    if (s >= 2) t.push_back(Seconds(a, Clock::now()));
  }
  arena.Release(slot);
  arena.Release(spare);
  return Median(t);
}

int Main() {
  std::string dir = absl::GetFlag(FLAGS_model_dir);
  if (absl::GetFlag(FLAGS_shape) == "mamba130m") {
    dir = "/tmp/seqboat-bench-mamba130m";
    if (!std::filesystem::exists(dir + "/model.safetensors")) {
      if (absl::Status s = WriteRandomMamba({}, dir); !s.ok()) {
        std::fprintf(stderr, "%s\n", s.ToString().c_str());
        return 1;
      }
    }
  } else if (!absl::GetFlag(FLAGS_shape).empty()) {
    std::fprintf(stderr, "--shape must be mamba130m or empty\n");
    return 1;
  }
  EngineOptions options;
  options.model_dir = dir;
  options.max_slots = 64;
  options.speculative_max_batch = 32;  // the bench looks for the threshold
  options.prefix_cache_bytes = 0;
  options.draft_model_dir = absl::GetFlag(FLAGS_draft_model_dir);
  // One engine per draft-length rule, side by side (the machine's load
  // drifts; runs interleave).
  std::vector<std::string> modes;
  std::vector<std::unique_ptr<Engine>> engines;
  for (absl::string_view mode :
       absl::StrSplit(absl::GetFlag(FLAGS_draft_lengths), ',')) {
    if (mode != "fixed" && mode != "adaptive") {
      std::fprintf(stderr, "--draft_lengths: fixed or adaptive, not %s\n",
                   std::string(mode).c_str());
      return 1;
    }
    options.adaptive_draft_length = mode == "adaptive";
    auto engine =
        Engine::Create(options, MakeCpuBackend(absl::GetFlag(FLAGS_threads)));
    if (!engine.ok()) {
      std::fprintf(stderr, "%s\n", engine.status().ToString().c_str());
      return 1;
    }
    modes.emplace_back(mode);
    engines.push_back(*std::move(engine));
  }
  if (engines.empty()) return 1;
  Engine& first = *engines.front();
  std::vector<int> ks;
  for (absl::string_view k :
       absl::StrSplit(absl::GetFlag(FLAGS_draft_tokens), ',')) {
    int v = 0;
    if (absl::SimpleAtoi(k, &v) && v > 0 && v <= options.max_draft_tokens)
      ks.push_back(v);
  }
  const int tokens = absl::GetFlag(FLAGS_tokens);
  const int repeats = std::max(1, absl::GetFlag(FLAGS_repeats));
  const double bandwidth = MeasureReadBandwidth();
  const int64_t weight_bytes =
      std::filesystem::file_size(dir + "/model.safetensors");
  std::printf(
      "model %s (%s), weights file %.1f MB; read bandwidth %.1f GB/s"
      " (a step that reads every weight once: %.0f tok/s at most)\n",
      first.summary().name.c_str(), dir.c_str(), weight_bytes / 1e6, bandwidth,
      bandwidth * 1e9 / weight_bytes);
  if (!options.draft_model_dir.empty()) {
    std::printf("drafts by the model of %s\n", options.draft_model_dir.c_str());
  }
  std::vector<int> batches;
  for (absl::string_view b :
       absl::StrSplit(absl::GetFlag(FLAGS_batches), ',')) {
    int v = 0;
    if (absl::SimpleAtoi(b, &v) && v > 0 && v <= 32) batches.push_back(v);
  }
  std::printf("%-16s %5s %6s %9s %10s %8s %10s %9s %10s %12s %12s %8s\n",
              "workload", "batch", "draft", "length", "tok/s", "ratio",
              "tok/cpu-s", "cpu-ratio", "accepted", "drafts/round",
              "tokens/step", "same");
  for (const auto& [name, text] :
       {std::pair<const char*, const char*>{"repetitive", kCode},
        {"non-repetitive", kStory}}) {
    const std::vector<int32_t> prompt = first.tokenizer().Encode(text);
    // The plain baseline once (no rule drafts anything), then each draft
    // count under each rule.
    std::vector<std::pair<int, size_t>> settings = {{0, 0}};
    for (int k : ks) {
      for (size_t m = 0; m < engines.size(); ++m) settings.push_back({k, m});
    }
    for (int batch : batches) {
      // Repeats go round the settings, so a change in the machine's load
      // falls on all of them alike.
      std::vector<std::vector<double>> rates(settings.size()),
          cpu_rates(settings.size());
      std::vector<Run> lasts(settings.size());
      for (int i = 0; i < repeats; ++i) {
        for (size_t j = 0; j < settings.size(); ++j) {
          const auto& [k, m] = settings[j];
          lasts[j] = Generate(*engines[m], prompt, tokens, k, batch);
          rates[j].push_back(lasts[j].tok_per_s);
          cpu_rates[j].push_back(lasts[j].tok_per_cpu_s);
        }
      }
      const double base = Median(rates[0]);
      const double cpu_base = Median(cpu_rates[0]);
      const std::vector<int32_t>& reference = lasts[0].tokens;
      for (size_t j = 0; j < settings.size(); ++j) {
        const auto& [k, m] = settings[j];
        const Run& last = lasts[j];
        const double median = Median(rates[j]);
        const double cpu_median = Median(cpu_rates[j]);
        // Tokens per step: of one sequence (the steps run all together).
        std::printf(
            "%-16s %5d %6d %9s %10.1f %8.2f %10.1f %9.2f %9.0f%% %12.2f "
            "%12.2f %8s\n",
            name, batch, k, k == 0 ? "-" : modes[m].c_str(), median,
            median / base, cpu_median, cpu_median / cpu_base,
            last.drafted > 0 ? 100.0 * last.accepted / last.drafted : 0.0,
            last.rounds > 0 ? static_cast<double>(last.drafted) / last.rounds
                            : 0.0,
            static_cast<double>(last.generated) / batch /
                std::max<int64_t>(1, last.steps),
            last.tokens == reference ? "yes" : "NO");
      }
    }
  }
  for (auto& engine : engines) engine->Shutdown();
  engines.clear();
  // What a round costs against a plain step: the speedup is the tokens a
  // round yields over this ratio.
  auto backend = MakeCpuBackend(absl::GetFlag(FLAGS_threads));
  auto model = Model::Load(dir, *backend, {4, 64, std::vector<int>{}, 16});
  if (!model.ok()) {
    std::fprintf(stderr, "%s\n", model.status().ToString().c_str());
    return 1;
  }
  const double plain = RoundSeconds(**model, 0, 50);
  std::printf("step at batch 1: plain decode %.3f ms", plain * 1e3);
  for (int k : ks) {
    const double round = RoundSeconds(**model, k, 50);
    const double spare_only = RoundSeconds(**model, k, 50, false);
    std::printf(
        "; round of %d drafts %.3f ms (x%.2f), without the slot's catch-up "
        "%.3f ms (x%.2f)",
        k, round * 1e3, round / plain, spare_only * 1e3, spare_only / plain);
  }
  std::printf("\n");
  // What --speculative_max_batch=auto finds for this model on this machine
  // (Engine::Create's probe: rounds of 4 drafts, 80 % acceptance).
  model->reset();
  ModelLimits limits;
  limits.max_slots = options.max_slots;
  limits.max_rows_per_step = 4 * kAutoSpeculativeMaxBatch * (2 + 4);
  limits.max_logit_rows = kAutoSpeculativeMaxBatch * (1 + 4);
  auto probed = Model::Load(dir, *backend, limits);
  if (!probed.ok()) {
    std::fprintf(stderr, "%s\n", probed.status().ToString().c_str());
    return 1;
  }
  EngineOptions automatic;
  automatic.max_slots = options.max_slots;
  std::printf("auto: %s\n",
              MeasureRoundThreshold(automatic, **probed).Describe().c_str());
  return 0;
}

}  // namespace
}  // namespace seqboat::bench

int main(int argc, char** argv) {
  absl::ParseCommandLine(argc, argv);
  return seqboat::bench::Main();
}
