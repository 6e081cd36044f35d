#include "clients/load/runner.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <mutex>
#include <utility>

#include "absl/strings/str_cat.h"
#include "clients/load/stream.h"
#include "seqboat/v1/generate.grpc.pb.h"

namespace seqboat {
namespace load {
namespace {

double Seconds(Clock::time_point t, Clock::time_point origin) {
  return std::chrono::duration<double>(t - origin).count();
}

// Shared by the driver and every stream's callbacks.
struct Shared {
  std::mutex mu;
  std::condition_variable cv;
  std::vector<RequestRecord> records;  // indexed by request number
  int64_t in_flight = 0;
  int64_t finished = 0;
  int64_t failed = 0;
  int64_t output_tokens = 0;
  double last_end_s = 0;  // seconds from the run's start
};

v1::GenerateRequest MakeRequest(const RunOptions& options, const Prompt& p,
                                int64_t index) {
  v1::GenerateRequest r;
  r.set_request_id(absl::StrCat(options.request_id_prefix, "-", index));
  if (p.text.has_value()) {
    r.set_text(*p.text);
  } else {
    r.mutable_token_ids()->mutable_ids()->Add(p.token_ids.begin(),
                                              p.token_ids.end());
  }
  r.mutable_sampling()->set_temperature(options.temperature);
  // Per-request seeds: the same run samples the same text.
  r.mutable_sampling()->set_seed(options.seed * 1000003u +
                                 static_cast<uint64_t>(index));
  r.mutable_stopping()->set_max_new_tokens(static_cast<uint32_t>(
      p.max_new_tokens.value_or(options.default_max_new_tokens)));
  r.mutable_stopping()->set_ignore_eos(options.ignore_eos);
  return r;
}

}  // namespace

absl::Status ValidateRunOptions(const RunOptions& o) {
  if (o.concurrency < 0) return absl::InvalidArgumentError("--concurrency < 0");
  if (o.concurrency == 0 && !(o.request_rate > 0)) {
    return absl::InvalidArgumentError(
        "give --concurrency N (closed loop) or --request_rate R > 0 (open "
        "loop)");
  }
  if (o.max_inflight < 0)
    return absl::InvalidArgumentError("--max_inflight < 0");
  if (o.num_requests < 0 || !(o.duration_s >= 0)) {
    return absl::InvalidArgumentError(
        "--num_requests and --duration_s must be >= 0");
  }
  if (o.num_requests == 0 && o.duration_s == 0) {
    return absl::InvalidArgumentError(
        "give --num_requests or --duration_s (or both: whichever ends first)");
  }
  if (!(o.request_timeout_s > 0)) {
    return absl::InvalidArgumentError("--request_timeout_s must be > 0");
  }
  if (o.default_max_new_tokens < 1) {
    return absl::InvalidArgumentError("--output_len must be >= 1");
  }
  return absl::OkStatus();
}

absl::StatusOr<RunResult> RunLoad(
    const std::vector<std::shared_ptr<grpc::Channel>>& channels,
    const RunOptions& options, const PromptSource& prompts,
    const std::function<void(const Progress&)>& on_progress) {
  absl::Status valid = ValidateRunOptions(options);
  if (!valid.ok()) return valid;
  if (channels.empty()) return absl::InvalidArgumentError("no channels");
  std::vector<std::unique_ptr<v1::TextGeneration::Stub>> stubs;
  for (const auto& channel : channels) {
    stubs.push_back(v1::TextGeneration::NewStub(channel));
  }

  Shared shared;
  // After `shared` and the stubs, so that it waits for the streams before
  // they go.
  StreamTracker tracker;
  const bool closed = options.concurrency > 0;
  const int64_t limit =
      closed ? options.concurrency
             : (options.max_inflight > 0 ? options.max_inflight
                                         : std::numeric_limits<int64_t>::max());
  PoissonArrivals arrivals(options.request_rate, options.seed);
  const Clock::time_point origin = Clock::now();
  const Clock::time_point stop_issuing =
      options.duration_s > 0
          ? origin + std::chrono::duration_cast<Clock::duration>(
                         std::chrono::duration<double>(options.duration_s))
          : Clock::time_point::max();
  Clock::time_point next_progress = origin + std::chrono::seconds(1);
  auto report = [&](std::unique_lock<std::mutex>& lock) {
    if (!on_progress || Clock::now() < next_progress) return;
    next_progress = Clock::now() + std::chrono::seconds(1);
    Progress p;
    p.started = static_cast<int64_t>(shared.records.size());
    p.finished = shared.finished;
    p.failed = shared.failed;
    p.in_flight = shared.in_flight;
    p.output_tokens = shared.output_tokens;
    p.elapsed_s = Seconds(Clock::now(), origin);
    lock.unlock();
    on_progress(p);
    lock.lock();
  };

  std::unique_lock<std::mutex> lock(shared.mu);
  for (int64_t i = 0; options.num_requests == 0 || i < options.num_requests;
       ++i) {
    // Open loop: wait for this request's arrival time.
    if (!closed) {
      const Clock::time_point at =
          origin + std::chrono::duration_cast<Clock::duration>(
                       std::chrono::duration<double>(arrivals.Next()));
      while (Clock::now() < std::min(at, stop_issuing)) {
        shared.cv.wait_until(lock, std::min({at, stop_issuing, next_progress}));
        report(lock);
      }
    }
    // Then for a free place (both loops).
    while (shared.in_flight >= limit && Clock::now() < stop_issuing) {
      shared.cv.wait_until(lock, std::min(stop_issuing, next_progress));
      report(lock);
    }
    if (Clock::now() >= stop_issuing) break;
    shared.records.emplace_back();
    ++shared.in_flight;
    lock.unlock();
    // Stream callbacks may run before StartGenerateStream returns; they only
    // touch `shared` under its lock.
    StreamCallbacks callbacks;
    callbacks.on_tokens = [&shared](int64_t n) {
      std::lock_guard<std::mutex> guard(shared.mu);
      shared.output_tokens += n;
    };
    callbacks.on_done = [&shared, i](StreamOutcome outcome) {
      {
        std::lock_guard<std::mutex> guard(shared.mu);
        if (!outcome.record.ok()) ++shared.failed;
        shared.records[static_cast<size_t>(i)] = std::move(outcome.record);
        --shared.in_flight;
        ++shared.finished;
        shared.last_end_s = std::max(shared.last_end_s, outcome.done_s);
        // Under the lock: once the last stream is counted the driver may
        // return and destroy `shared`.
        shared.cv.notify_all();
      }
    };
    StartGenerateStream(stubs[static_cast<size_t>(i) % stubs.size()].get(),
                        MakeRequest(options, prompts(i), i), origin,
                        options.request_timeout_s, /*keep_token_ids=*/false,
                        std::move(callbacks), tracker);
    lock.lock();
    report(lock);
  }
  // Every stream ends by its deadline at the latest.
  while (shared.in_flight > 0) {
    shared.cv.wait_until(lock, next_progress);
    report(lock);
  }
  lock.unlock();
  tracker.Wait();
  lock.lock();
  RunResult result;
  result.records = std::move(shared.records);
  result.duration_s = shared.last_end_s;
  return result;
}

}  // namespace load
}  // namespace seqboat
