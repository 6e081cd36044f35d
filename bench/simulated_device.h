// A backend whose every step costs a fixed device time and nothing else, for
// measuring the host path (scheduler, engine loop, server, load client)
// without a GPU. Memory goes to the host (a real model's shapes load and its
// state arena exists), compute ops do no work, and the device is a queue:
// each step runs for `step_time` from when it was launched or the previous
// step ended, whichever is later; the host blocks only where it reads a
// step's tokens (SampleRows). Tokens are printable bytes drawn from each
// row's seed and step, so detokenizing and streaming them is real work.
//
// Not for production: a benchmark's stand-in for CUDA's asynchrony.
#ifndef SEQBOAT_BENCH_SIMULATED_DEVICE_H_
#define SEQBOAT_BENCH_SIMULATED_DEVICE_H_

#include <chrono>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <vector>

#include "engine/backend/testing/forwarding_backend.h"

namespace seqboat::bench {

// What the device did: its steps, their rows, and how long it sat idle
// waiting for the host to launch the next step.
struct DeviceCounters {
  int64_t steps = 0;
  int64_t sampled_rows = 0;
  double busy_s = 0;
  double idle_s = 0;          // between a step's end and the next launch
  double host_blocked_s = 0;  // the host waiting in SampleRows
};

class SimulatedDevice final : public ForwardingBackend {
 public:
  // `host`: a backend whose memory is the host's (the CPU backend), for
  // uploads, the arena and copies.
  // `pipelines`: whether the engine may launch a step before it reads the
  // last (Backend::PipelinesSteps), as on CUDA's stream.
  SimulatedDevice(std::unique_ptr<Backend> host,
                  std::chrono::nanoseconds step_time, bool pipelines);

  std::string name() const override { return "simulated"; }
  bool MemoryIsHost() const override { return false; }
  bool SamplesOnDevice() const override { return true; }
  bool PipelinesSteps() const override { return pipelines_; }
  absl::Status LaunchSampleRows(const SampleRowsParams& p) override;
  absl::Status WaitSampledTokens() override;
  const int32_t* SampledTokens() const override { return fed_.data(); }
  // CUDA's decode buckets, so steps are padded as they are there.
  std::vector<int> CaptureBuckets(int max_slots) const override;

  // Every op does no work; the embedding, which starts every step, launches
  // it on the device's queue.
#define SEQBOAT_SIMULATED_OP(Name, Params) \
  void Name(const Params& p) override { Run(p); }
  SEQBOAT_BACKEND_OPS(SEQBOAT_SIMULATED_OP)
#undef SEQBOAT_SIMULATED_OP
  absl::Status SampleRows(const SampleRowsParams& p) override;

  // Counters since the last call, then reset.
  DeviceCounters TakeCounters();

 private:
  using Clock = std::chrono::steady_clock;
  template <typename Params>
  void Run(const Params&) {}
  void Run(const EmbedParams&);
  // The tokens of p's rows, as a step ending at `end` samples them.
  static void Draw(const SampleRowsParams& p, int32_t* tokens);

  struct Launched {
    Clock::time_point end;
    int32_t* host = nullptr;
    std::vector<int32_t> tokens;
  };
  const bool pipelines_;
  std::deque<Launched> in_flight_;  // the engine thread's
  std::vector<int32_t> fed_;
  static void WaitUntil(Clock::time_point t);

  const std::chrono::nanoseconds step_time_;
  std::mutex mu_;  // the counters, read from the benchmark's thread
  DeviceCounters counters_;
  bool launched_ = false;
  Clock::time_point free_at_{};  // when the device finishes its last step
  Clock::time_point step_end_{};
};

}  // namespace seqboat::bench

#endif  // SEQBOAT_BENCH_SIMULATED_DEVICE_H_
