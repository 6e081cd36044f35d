// Decode speed of any canonical model on the CPU backend: tokens/s at the
// given batch sizes, prefill tokens/s, and batch-1 time per token at context
// 1k vs a long context (flat when every block's state is constant).
//
//   bazel run //bench:stack_bench -- --model_dir=DIR [--batches=1,32]
//   bench/layer_kinds_bench.sh runs it on one random model per kind.
#include <algorithm>
#include <cstdio>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "bench/bench_util.h"
#include "engine/model/model.h"
#include "kernels/cpu/cpu_backend.h"

ABSL_FLAG(std::string, model_dir, "", "canonical model directory");
ABSL_FLAG(std::string, label, "", "name printed on the result line");
ABSL_FLAG(std::string, batches, "1,32", "decode batch sizes");
ABSL_FLAG(int, steps, 10, "timed decode steps per figure");
ABSL_FLAG(int, prefill_chunk, 512, "prefill chunk (rows per step)");
ABSL_FLAG(int, long_context, 65536,
          "context for the flatness figure (0 skips)");

namespace seqboat {
namespace {

// Every layer's counters, named "<block index>.<stat>".
std::vector<std::pair<std::string, int64_t>> StatTotals(const Model& model) {
  std::vector<std::pair<std::string, int64_t>> out;
  for (size_t i = 0; i < model.layers().size(); ++i) {
    std::vector<LayerStat> stats;
    model.layers()[i]->AppendStats(&stats, /*settled=*/true);
    for (const LayerStat& s : stats)
      out.push_back({std::to_string(i) + "." + s.name, s.value});
  }
  return out;
}

// " GAU activation during decode: block 1 24.8%, ..." for blocks that count
// activated tokens (SeqBoat), measured, not configured.
std::string ActivationRates(
    const std::vector<std::pair<std::string, int64_t>>& before,
    const std::vector<std::pair<std::string, int64_t>>& after) {
  std::string out;
  for (size_t i = 0; i + 1 < after.size(); ++i) {
    const std::string& name = after[i].first;
    const size_t dot = name.find('.');
    if (name.substr(dot + 1) != "seqboat.tokens") continue;
    const int64_t tokens = after[i].second - before[i].second;
    const int64_t active = after[i + 1].second - before[i + 1].second;
    if (tokens <= 0) continue;
    char buf[96];
    std::snprintf(buf, sizeof(buf),
                  " block %s GAU active %.1f%% of %lld decode tokens;",
                  name.substr(0, dot).c_str(), 100.0 * active / tokens,
                  static_cast<long long>(tokens));
    out += buf;
  }
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
  const int max_b = *std::max_element(batches.begin(), batches.end());
  const int chunk = absl::GetFlag(FLAGS_prefill_chunk);
  auto backend = MakeCpuBackend();
  auto loaded = Model::Load(absl::GetFlag(FLAGS_model_dir), *backend,
                            {max_b + 1, std::max(chunk, max_b)});
  if (!loaded.ok()) {
    std::fprintf(stderr, "%s\n", loaded.status().ToString().c_str());
    return 1;
  }
  Model& model = **loaded;
  std::vector<std::string> kinds;
  for (const auto& layer : model.layers()) kinds.push_back(layer->kind());
  std::string label = absl::GetFlag(FLAGS_label);
  if (label.empty()) label = absl::StrJoin(kinds, "+");
  const int steps = absl::GetFlag(FLAGS_steps);

  std::vector<int> slots;
  for (int i = 0; i < max_b; ++i) slots.push_back(*model.arena().Acquire());
  // A short prompt first, so decode runs on a populated state.
  for (int s : slots) bench::Prefill(model, s, 64, chunk);
  std::string line = label + ":";
  const std::vector<std::pair<std::string, int64_t>> before = StatTotals(model);
  for (int b : batches) {
    const std::vector<int> use(slots.begin(), slots.begin() + b);
    const double step = bench::DecodeStepSeconds(model, use, steps);
    line += " B=" + std::to_string(b) + " " +
            std::to_string(static_cast<int>(b / step)) + " tok/s;";
  }
  line += ActivationRates(before, StatTotals(model));
  for (int s : slots) model.arena().Release(s);
  const int s = *model.arena().Acquire();
  const double prefill_s = bench::Prefill(model, s, 2048, chunk);
  line += " prefill " + std::to_string(static_cast<int>(2048 / prefill_s)) +
          " tok/s;";
  const int long_ctx = absl::GetFlag(FLAGS_long_context);
  if (long_ctx > 2048 + steps + 2) {
    const double at_2k = bench::DecodeStepSeconds(model, {s}, steps);
    bench::Prefill(model, s, long_ctx - 2048 - steps - 2, chunk);
    const double at_long = bench::DecodeStepSeconds(model, {s}, steps);
    char buf[160];
    std::snprintf(buf, sizeof(buf),
                  " ms/token at 2k %.3f, at %dk %.3f (ratio %.2f);",
                  at_2k * 1e3, long_ctx / 1024, at_long * 1e3, at_long / at_2k);
    line += buf;
  }
  line += " state " + std::to_string(model.arena().bytes_per_slot() / 1024) +
          " KiB/seq";
  std::printf("%s\n", line.c_str());
  return 0;
}

}  // namespace
}  // namespace seqboat

int main(int argc, char** argv) {
  absl::ParseCommandLine(argc, argv);
  return seqboat::Run();
}
