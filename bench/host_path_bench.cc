// The host path under load, without a GPU: the real scheduler, engine loop
// and gRPC server in this process, on a SimulatedDevice whose every step
// costs --step_ms of device time and nothing else, driven by the real load
// client (clients/load) in a child process. For each --slots value it
// prints delivered tokens/s against the ideal (slots / step time), the
// device's idle time per step (host work the loop did not hide behind the
// device) per step and per sequence, and the CPU time of this process and
// of the load client, so a client that cannot keep up shows.
//
//   bazel run -c opt //bench:host_path_bench -- --slots=64,256,1024
#include <grpcpp/grpcpp.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <functional>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "bench/simulated_device.h"
#include "engine/engine.h"
#include "kernels/cpu/cpu_backend.h"
#include "server/request_validation.h"
#include "server/text_generation_service.h"

ABSL_FLAG(std::string, slots, "64,256,1024", "server slot counts to run");
ABSL_FLAG(double, step_ms, 1.7,
          "device time of one step (1.7: the 130M Mamba at batch 256 on an "
          "H100)");
ABSL_FLAG(std::string, model_dir, "tests/data/tiny_mamba",
          "a model whose shapes load (its weights are never computed with)");
ABSL_FLAG(std::string, load_bin, "clients/load/seqboat_load",
          "the load client");
ABSL_FLAG(double, duration_s, 12, "load per slot count, after the warm-up");
ABSL_FLAG(int32_t, input_len, 16, "prompt tokens per request");
ABSL_FLAG(int32_t, output_len, 256, "tokens generated per request");
ABSL_FLAG(int32_t, num_channels, 0,
          "HTTP/2 connections of the load client (0: its default)");
ABSL_FLAG(double, repetition_penalty, 1.0,
          "each request's repetition penalty (1: off); with the frequency "
          "penalty, its penalised ids are the sample rows' to carry");
ABSL_FLAG(double, frequency_penalty, 0.0,
          "each request's frequency penalty (0: off)");
ABSL_FLAG(bool, pipeline, true,
          "the device pipelines steps, as CUDA's stream does (false: the "
          "engine's synchronous loop)");
ABSL_FLAG(int32_t, step_token_budget, 0,
          "the engine's step token budget (0: the slots plus 512, so that "
          "prompts are read while every slot decodes)");
ABSL_FLAG(bool, grpc, true,
          "through the gRPC server and the load client; false: requests go "
          "straight to Engine::Submit from this process (the engine alone)");
ABSL_FLAG(int64_t, prefix_cache_bytes, int64_t{1} << 30,
          "the server's prefix cache (its default)");

namespace seqboat::bench {
namespace {

double CpuSeconds(const rusage& r) {
  return r.ru_utime.tv_sec + r.ru_stime.tv_sec +
         1e-6 * (r.ru_utime.tv_usec + r.ru_stime.tv_usec);
}

struct LoadResult {
  bool ok = false;
  double output_tok_s = 0;
  double median_tpot_ms = 0;
  int64_t completed = 0;
  int64_t failed = 0;
  double cpu_s = 0;  // the load client's own
};

// Runs the load client against `port` and reads its result file.
LoadResult RunLoad(int port, int concurrency, double duration_s) {
  const char* tmp = std::getenv("TMPDIR");
  const std::string result = absl::StrCat(
      tmp != nullptr ? tmp : "/tmp", "/host_path_load_", getpid(), ".json");
  std::vector<std::string> args = {
      absl::GetFlag(FLAGS_load_bin),
      absl::StrCat("--target=127.0.0.1:", port),
      "--workload=requests",
      absl::StrCat("--concurrency=", concurrency),
      absl::StrCat("--duration_s=", duration_s),
      absl::StrCat("--input_len=", absl::GetFlag(FLAGS_input_len)),
      absl::StrCat("--output_len=", absl::GetFlag(FLAGS_output_len)),
      absl::StrCat("--num_channels=", absl::GetFlag(FLAGS_num_channels)),
      "--ignore_eos",
      "--progress=false",
      absl::StrCat("--result_json=", result)};
  std::vector<char*> argv;
  for (std::string& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  LoadResult out;
  const pid_t pid = fork();
  if (pid == 0) {
    execv(argv[0], argv.data());
    std::perror("execv");
    _exit(127);
  }
  int status = 0;
  rusage usage{};
  if (pid < 0 || wait4(pid, &status, 0, &usage) != pid) return out;
  out.cpu_s = CpuSeconds(usage);
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) return out;
  std::ifstream in(result);
  nlohmann::json j = nlohmann::json::parse(in, nullptr, false);
  std::remove(result.c_str());
  if (!j.is_object()) return out;
  out.ok = true;
  out.output_tok_s = j.value("output_throughput", 0.0);
  out.median_tpot_ms = j.value("median_tpot_ms", 0.0);
  out.completed = j.value("completed", int64_t{0});
  out.failed = j.value("failed", int64_t{0});
  return out;
}

// Keeps `slots` requests in flight on the engine for `duration_s`, each
// replaced as it finishes; returns generated tokens per second.
double RunDirect(Engine& engine, int slots, double duration_s) {
  std::atomic<int64_t> tokens{0}, finished{0};
  std::atomic<bool> stop{false};
  std::mutex mu;
  std::condition_variable cv;
  int64_t next_id = 0;
  std::function<void()> submit;
  submit = [&] {
    Request r;
    r.id = absl::StrCat(next_id++);
    for (int i = 0; i < absl::GetFlag(FLAGS_input_len); ++i)
      r.prompt.push_back('a' + (next_id * 7 + i) % 26);
    r.sampling.temperature = 0;
    r.sampling.repetition_penalty =
        static_cast<float>(absl::GetFlag(FLAGS_repetition_penalty));
    r.sampling.frequency_penalty =
        static_cast<float>(absl::GetFlag(FLAGS_frequency_penalty));
    r.stopping.max_new_tokens = absl::GetFlag(FLAGS_output_len);
    r.stopping.ignore_eos = true;
    r.sink = [&](GenerationEvent e) {
      tokens += static_cast<int64_t>(e.token_ids.size());
      if (e.finish != FinishReason::kNone || !e.status.ok()) {
        ++finished;
        std::lock_guard<std::mutex> lock(mu);
        cv.notify_one();
      }
    };
    if (!engine.Submit(std::move(r)).ok()) std::abort();
  };
  for (int i = 0; i < slots; ++i) submit();
  int64_t replaced = 0;
  const auto t0 = std::chrono::steady_clock::now();
  const auto end = t0 + std::chrono::duration<double>(duration_s);
  const int64_t start_tokens = tokens.load();
  while (std::chrono::steady_clock::now() < end) {
    std::unique_lock<std::mutex> lock(mu);
    cv.wait_for(lock, std::chrono::milliseconds(5),
                [&] { return finished.load() > replaced; });
    lock.unlock();
    while (finished.load() > replaced) {
      ++replaced;
      submit();
    }
  }
  const double wall =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t0)
          .count();
  const double rate = (tokens.load() - start_tokens) / wall;
  engine.Shutdown();
  return rate;
}

int RunSlots(int slots) {
  const auto step_time = std::chrono::nanoseconds(
      static_cast<int64_t>(absl::GetFlag(FLAGS_step_ms) * 1e6));
  auto device = std::make_unique<SimulatedDevice>(
      MakeCpuBackend(1), step_time, absl::GetFlag(FLAGS_pipeline));
  SimulatedDevice* dev = device.get();
  EngineOptions options;
  options.model_dir = absl::GetFlag(FLAGS_model_dir);
  options.max_slots = slots;
  options.max_queue = 2 * slots;
  options.prefix_cache_bytes = absl::GetFlag(FLAGS_prefix_cache_bytes);
  options.step_token_budget = absl::GetFlag(FLAGS_step_token_budget) > 0
                                  ? absl::GetFlag(FLAGS_step_token_budget)
                                  : slots + 512;
  auto engine = Engine::Create(options, std::move(device));
  if (!engine.ok()) {
    std::fprintf(stderr, "engine: %s\n", engine.status().ToString().c_str());
    return 1;
  }
  if (!absl::GetFlag(FLAGS_grpc)) {
    dev->TakeCounters();
    const double rate =
        RunDirect(**engine, slots, absl::GetFlag(FLAGS_duration_s));
    const DeviceCounters c = dev->TakeCounters();
    const double ideal = slots / (absl::GetFlag(FLAGS_step_ms) * 1e-3);
    const double steps = std::max<int64_t>(c.steps, 1);
    std::printf("%6d %10.0f %10.0f %6.1f%% %9.1f %8.2f %8.1f (engine alone)\n",
                slots, ideal, rate, 100 * rate / ideal, 1e6 * c.idle_s / steps,
                1e6 * c.idle_s / std::max<int64_t>(c.sampled_rows, 1),
                c.sampled_rows / steps);
    return 0;
  }
  ValidationLimits limits;
  limits.max_n = 1;
  TextGenerationService service(engine->get(), limits);
  grpc::ServerBuilder builder;
  int port = 0;
  builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(),
                           &port);
  builder.RegisterService(&service);
  std::unique_ptr<grpc::Server> server = builder.BuildAndStart();
  if (server == nullptr || port == 0) {
    std::fprintf(stderr, "cannot start the gRPC server\n");
    return 1;
  }

  // A short warm-up fills the slots and the decode buckets' first steps.
  RunLoad(port, slots, 2);
  dev->TakeCounters();
  rusage before{}, after{};
  getrusage(RUSAGE_SELF, &before);
  const auto t0 = std::chrono::steady_clock::now();
  const LoadResult load = RunLoad(port, slots, absl::GetFlag(FLAGS_duration_s));
  const double wall =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t0)
          .count();
  getrusage(RUSAGE_SELF, &after);
  const DeviceCounters c = dev->TakeCounters();
  server->Shutdown(std::chrono::system_clock::now());
  (*engine)->Shutdown();
  if (!load.ok) {
    std::fprintf(stderr, "load client failed at %d slots\n", slots);
    return 1;
  }
  const double step_s = absl::GetFlag(FLAGS_step_ms) * 1e-3;
  const double ideal = slots / step_s;
  const double steps = std::max<int64_t>(c.steps, 1);
  const double batch = c.sampled_rows / steps;
  const double host_us_step = 1e6 * c.idle_s / steps;
  std::printf(
      "%6d %10.0f %10.0f %6.1f%% %8.3f %9.1f %8.2f %8.1f %8.2f %8.2f %6.2f "
      "%6lld %4lld\n",
      slots, ideal, load.output_tok_s, 100.0 * load.output_tok_s / ideal,
      load.median_tpot_ms, host_us_step, batch > 0 ? host_us_step / batch : 0.0,
      batch, (CpuSeconds(after) - CpuSeconds(before)) / wall, load.cpu_s / wall,
      c.host_blocked_s / wall, static_cast<long long>(load.completed),
      static_cast<long long>(load.failed));
  std::fflush(stdout);
  return 0;
}

int Run() {
  std::vector<int> slot_counts;
  for (absl::string_view s : absl::StrSplit(absl::GetFlag(FLAGS_slots), ',')) {
    int v = 0;
    if (!absl::SimpleAtoi(s, &v) || v <= 0) {
      std::fprintf(stderr, "--slots: not a positive count: %s\n",
                   std::string(s).c_str());
      return 2;
    }
    slot_counts.push_back(v);
  }
  std::printf(
      "simulated device: %.3f ms a step; in %d / out %d tokens; %u cores\n",
      absl::GetFlag(FLAGS_step_ms), absl::GetFlag(FLAGS_input_len),
      absl::GetFlag(FLAGS_output_len), std::thread::hardware_concurrency());
  std::printf(
      " slots   ideal/s  delivered  share  TPOT ms  host us/step  us/seq   "
      "batch  srv cpu  load cpu  blocked  done fail\n");
  for (int slots : slot_counts) {
    if (RunSlots(slots) != 0) return 1;
  }
  return 0;
}

}  // namespace
}  // namespace seqboat::bench

int main(int argc, char** argv) {
  absl::ParseCommandLine(argc, argv);
  return seqboat::bench::Run();
}
