#include "bench/bench_util.h"

#include <immintrin.h>
#include <omp.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <optional>

namespace seqboat::bench {

double Seconds(Clock::time_point a, Clock::time_point b) {
  return std::chrono::duration<double>(b - a).count();
}

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

// Read bandwidth over a buffer far larger than the caches, all threads, each
// summing its share with four independent vector accumulators so the loop is
// bound by memory, not by the latency of a chain of adds.
double MeasureReadBandwidth() {
  const size_t n = size_t{1} << 28;  // 1 GiB of floats
  std::vector<float> buf(n, 1.0f);
  std::vector<double> t;
  float sink = 0;
  for (int rep = 0; rep < 5; ++rep) {
    const auto a = Clock::now();
    float total = 0;
#pragma omp parallel reduction(+ : total)
    {
      const size_t nt = omp_get_num_threads(), id = omp_get_thread_num();
      const size_t lo = n * id / nt, hi = n * (id + 1) / nt;
      __m256 s0 = _mm256_setzero_ps(), s1 = s0, s2 = s0, s3 = s0;
      for (size_t i = lo; i + 32 <= hi; i += 32) {
        s0 = _mm256_add_ps(s0, _mm256_loadu_ps(&buf[i]));
        s1 = _mm256_add_ps(s1, _mm256_loadu_ps(&buf[i + 8]));
        s2 = _mm256_add_ps(s2, _mm256_loadu_ps(&buf[i + 16]));
        s3 = _mm256_add_ps(s3, _mm256_loadu_ps(&buf[i + 24]));
      }
      float lanes[8];
      _mm256_storeu_ps(
          lanes, _mm256_add_ps(_mm256_add_ps(s0, s1), _mm256_add_ps(s2, s3)));
      for (float v : lanes) total += v;
    }
    t.push_back(Seconds(a, Clock::now()));
    sink += total;
  }
  if (sink == 42) std::printf(" ");
  // A limit, so the best of the runs: on a shared host a neighbour's traffic
  // only ever lowers a run.
  return n * sizeof(float) / *std::min_element(t.begin(), t.end()) / 1e9;
}

double MeasureUpdateBandwidth() {
  const size_t n = size_t{1} << 27;  // 512 MiB of floats
  std::vector<float> buf(n, 1.0f);
  std::vector<double> t;
  for (int rep = 0; rep < 5; ++rep) {
    const auto a = Clock::now();
#pragma omp parallel
    {
      const size_t nt = omp_get_num_threads(), id = omp_get_thread_num();
      const size_t lo = n * id / nt / 8 * 8, hi = n * (id + 1) / nt / 8 * 8;
      const __m256 m = _mm256_set1_ps(0.5f), c = _mm256_set1_ps(1.0f);
      for (size_t i = lo; i < hi; i += 8) {
        _mm256_storeu_ps(&buf[i],
                         _mm256_fmadd_ps(_mm256_loadu_ps(&buf[i]), m, c));
      }
    }
    t.push_back(Seconds(a, Clock::now()));
  }
  return 2.0 * n * sizeof(float) / *std::min_element(t.begin(), t.end()) / 1e9;
}

namespace {
// One step, sampled on the device where the backend can, else logits to the
// host; exits on failure. Its wall seconds.
double TimedForward(Model& model, const StepRows& step, bool on_device,
                    const std::vector<SampleRow>& greedy,
                    std::vector<int32_t>& tokens, std::vector<float>& logits) {
  const auto a = Clock::now();
  const absl::Status st =
      on_device
          ? model.ForwardSample(step, greedy.data(), nullptr, tokens.data())
          : model.Forward(step, logits.data());
  if (!st.ok()) {
    std::fprintf(stderr, "forward failed: %s\n", st.ToString().c_str());
    std::exit(1);
  }
  return Seconds(a, Clock::now());
}

}  // namespace

// Fills `slots` with a prompt, then times decode steps of all of them.
double DecodeStepSeconds(Model& model, const std::vector<int>& slots,
                         int steps) {
  const int b = static_cast<int>(slots.size());
  StepRows step;
  step.ids.assign(b, 65);
  for (int i = 0; i < b; ++i) {
    step.segs.push_back({slots[i], i, 1});
    step.logit_rows.push_back(i);
  }
  // The engine's own path: a backend that samples on the device never copies
  // the logits out (at batch 256 they are 51 MB for a 50k vocabulary).
  const bool on_device = model.backend().SamplesOnDevice();
  std::vector<float> logits(
      on_device ? 0 : static_cast<size_t>(b) * model.vocab_size());
  std::vector<SampleRow> greedy(b);
  for (SampleRow& r : greedy) r.valid_vocab = model.vocab_size();
  std::vector<int32_t> tokens(b);
  std::vector<double> t;
  for (int s = 0; s < steps + 2; ++s) {
    // Tokens vary over steps and sequences, so blocks whose work depends on
    // the token (a SeqBoat router) see a realistic mix.
    for (int i = 0; i < b; ++i) step.ids[i] = (s * 7 + i * 13 + 1) % 256;
    const double seconds =
        TimedForward(model, step, on_device, greedy, tokens, logits);
    if (s >= 2) t.push_back(seconds);  // two warm-up steps
  }
  return Median(t);
}

double MixedStepSeconds(Model& model, const std::vector<int>& slots, int chunk,
                        int steps) {
  const int b = static_cast<int>(slots.size());
  const bool on_device = model.backend().SamplesOnDevice();
  std::vector<float> logits(
      on_device ? 0 : static_cast<size_t>(b + 1) * model.vocab_size());
  std::vector<SampleRow> greedy(b + 1);
  for (SampleRow& r : greedy) r.valid_vocab = model.vocab_size();
  std::vector<int32_t> tokens(b + 1);
  std::vector<double> t;
  for (int s = 0; s < steps + 2; ++s) {
    const std::optional<int> fresh = model.arena().Acquire();
    if (!fresh.has_value()) {
      std::fprintf(stderr, "no free slot for the mixed step's chunk\n");
      std::exit(1);
    }
    StepRows step;
    for (int i = 0; i < b; ++i) {
      if (i == b / 2) {
        const int start = step.n();
        for (int j = 0; j < chunk; ++j) step.ids.push_back((j * 13 + 7) % 256);
        step.segs.push_back({*fresh, start, chunk});
        step.logit_rows.push_back(step.n() - 1);
      }
      step.segs.push_back({slots[i], step.n(), 1});
      step.logit_rows.push_back(step.n());
      step.ids.push_back((s * 7 + i * 13 + 1) % 256);
    }
    const double seconds =
        TimedForward(model, step, on_device, greedy, tokens, logits);
    if (s >= 2) t.push_back(seconds);
    model.arena().Release(*fresh);
  }
  return Median(t);
}

double Prefill(Model& model, int slot, int tokens, int chunk) {
  std::vector<float> logits(model.vocab_size());
  StepRows step;
  const auto a = Clock::now();
  for (int done = 0; done < tokens; done += chunk) {
    const int len = std::min(chunk, tokens - done);
    step.ids.resize(len);
    for (int i = 0; i < len; ++i) step.ids[i] = (i * 13 + 7) % 256;
    step.segs = {{slot, 0, len}};
    step.logit_rows = {len - 1};
    if (!model.Forward(step, logits.data()).ok()) std::exit(1);
  }
  return Seconds(a, Clock::now());
}

}  // namespace seqboat::bench
