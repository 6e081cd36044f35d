#include "bench/simulated_device.h"

#include <algorithm>
#include <thread>
#include <utility>

#include "engine/backend/decode_buckets.h"

namespace seqboat::bench {

SimulatedDevice::SimulatedDevice(std::unique_ptr<Backend> host,
                                 std::chrono::nanoseconds step_time,
                                 bool pipelines)
    : ForwardingBackend(std::move(host)),
      step_time_(step_time),
      pipelines_(pipelines) {}

std::vector<int> SimulatedDevice::CaptureBuckets(int max_slots) const {
  return DefaultDecodeBuckets(max_slots);
}

void SimulatedDevice::Run(const EmbedParams&) {
  const Clock::time_point now = Clock::now();
  std::lock_guard<std::mutex> lock(mu_);
  const Clock::time_point start = now > free_at_ ? now : free_at_;
  if (launched_ && now > free_at_) {
    counters_.idle_s += std::chrono::duration<double>(now - free_at_).count();
  }
  launched_ = true;
  step_end_ = start + step_time_;
  free_at_ = step_end_;
  ++counters_.steps;
  counters_.busy_s += std::chrono::duration<double>(step_time_).count();
}

absl::Status SimulatedDevice::SampleRows(const SampleRowsParams& p) {
  Clock::time_point end;
  {
    std::lock_guard<std::mutex> lock(mu_);
    end = step_end_;
    counters_.sampled_rows += p.m;
  }
  const Clock::time_point before = Clock::now();
  WaitUntil(end);
  Draw(p, p.tokens);
  std::lock_guard<std::mutex> lock(mu_);
  counters_.host_blocked_s +=
      std::chrono::duration<double>(Clock::now() - before).count();
  return absl::OkStatus();
}

absl::Status SimulatedDevice::LaunchSampleRows(const SampleRowsParams& p) {
  Launched l;
  {
    std::lock_guard<std::mutex> lock(mu_);
    l.end = step_end_;
    counters_.sampled_rows += p.m;
  }
  l.host = p.tokens;
  l.tokens.resize(static_cast<size_t>(p.m));
  Draw(p, l.tokens.data());
  fed_ = l.tokens;
  in_flight_.push_back(std::move(l));
  return absl::OkStatus();
}

absl::Status SimulatedDevice::WaitSampledTokens() {
  if (in_flight_.empty()) {
    return absl::FailedPreconditionError("no launch to wait for");
  }
  Launched l = std::move(in_flight_.front());
  in_flight_.pop_front();
  const Clock::time_point before = Clock::now();
  WaitUntil(l.end);
  std::copy(l.tokens.begin(), l.tokens.end(), l.host);
  std::lock_guard<std::mutex> lock(mu_);
  counters_.host_blocked_s +=
      std::chrono::duration<double>(Clock::now() - before).count();
  return absl::OkStatus();
}

void SimulatedDevice::Draw(const SampleRowsParams& p, int32_t* tokens) {
  for (int j = 0; j < p.m; ++j) {
    // Lower-case letters and spaces: one byte, one complete character.
    const uint64_t h = (p.rows[j].seed + 1) * 0x9E3779B97F4A7C15ull +
                       p.rows[j].step * 0xBF58476D1CE4E5B9ull;
    const int32_t letter = static_cast<int32_t>((h >> 33) % 27);
    tokens[j] = letter == 26 ? ' ' : 'a' + letter;
  }
}

DeviceCounters SimulatedDevice::TakeCounters() {
  std::lock_guard<std::mutex> lock(mu_);
  DeviceCounters out = counters_;
  counters_ = DeviceCounters();
  return out;
}

void SimulatedDevice::WaitUntil(Clock::time_point t) {
  // Sleep most of the way, then spin: a sleep alone overshoots by tens of
  // microseconds, a few percent of a millisecond step.
  const auto slack = std::chrono::microseconds(80);
  if (Clock::now() + slack < t) std::this_thread::sleep_until(t - slack);
  while (Clock::now() < t) {
  }
}

}  // namespace seqboat::bench
