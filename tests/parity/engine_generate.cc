// Runs one request through the whole engine (scheduler, chunked prefill,
// sampler) and prints the generated token ids, comma-separated, on stdout. The
// parity tests compare them with the original framework's greedy generate().
//
//   engine_generate --model DIR --tokens 1,2,3 --max_new_tokens 64
//                   [--temperature 0] [--budget 16]
#include <cstdio>
#include <future>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "engine/engine.h"
#include "kernels/cpu/cpu_backend.h"
#include "spdlog/sinks/stdout_color_sinks.h"
#include "spdlog/spdlog.h"

ABSL_FLAG(std::string, model, "", "canonical model directory");
ABSL_FLAG(std::string, tokens, "", "comma-separated prompt token ids");
ABSL_FLAG(int, max_new_tokens, 64, "tokens to generate");
ABSL_FLAG(float, temperature, 0.0f, "0 = greedy");
ABSL_FLAG(int, budget, 16, "engine step token budget (prefill chunk size)");

int main(int argc, char** argv) {
  absl::ParseCommandLine(argc, argv);
  // stdout carries the ids alone.
  spdlog::set_default_logger(spdlog::stderr_color_mt("engine_generate"));
  seqboat::EngineOptions options;
  options.model_dir = absl::GetFlag(FLAGS_model);
  options.max_slots = 2;
  options.step_token_budget = absl::GetFlag(FLAGS_budget);
  auto engine = seqboat::Engine::Create(options, seqboat::MakeCpuBackend(0));
  if (!engine.ok()) {
    std::fprintf(stderr, "%s\n", engine.status().ToString().c_str());
    return 1;
  }
  seqboat::Request request;
  for (absl::string_view piece :
       absl::StrSplit(absl::GetFlag(FLAGS_tokens), ',')) {
    int32_t id;
    if (!absl::SimpleAtoi(piece, &id)) {
      std::fprintf(stderr, "bad token id '%s'\n", std::string(piece).c_str());
      return 2;
    }
    request.prompt.push_back(id);
  }
  request.sampling.temperature = absl::GetFlag(FLAGS_temperature);
  request.stopping.max_new_tokens = absl::GetFlag(FLAGS_max_new_tokens);
  request.stopping.ignore_eos = true;
  std::vector<int32_t> out;
  std::promise<absl::Status> done;
  request.sink = [&](seqboat::GenerationEvent e) {
    out.insert(out.end(), e.token_ids.begin(), e.token_ids.end());
    if (e.finish != seqboat::FinishReason::kNone || !e.status.ok())
      done.set_value(e.status);
  };
  if (absl::Status s = (*engine)->Submit(std::move(request)); !s.ok()) {
    std::fprintf(stderr, "%s\n", s.ToString().c_str());
    return 1;
  }
  const absl::Status final_status = done.get_future().get();
  (*engine)->Shutdown();
  if (!final_status.ok()) {
    std::fprintf(stderr, "%s\n", final_status.ToString().c_str());
    return 1;
  }
  std::printf("%s\n", absl::StrJoin(out, ",").c_str());
  return 0;
}
