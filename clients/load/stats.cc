#include "clients/load/stats.h"

#include <algorithm>
#include <cmath>
#include <numeric>

namespace seqboat {
namespace load {

double Percentile(const std::vector<double>& sorted, double q) {
  if (sorted.empty()) return 0;
  q = std::clamp(q, 0.0, 100.0);
  const double rank = q / 100.0 * static_cast<double>(sorted.size() - 1);
  const size_t lo = static_cast<size_t>(std::floor(rank));
  const size_t hi = std::min(lo + 1, sorted.size() - 1);
  const double frac = rank - static_cast<double>(lo);
  return sorted[lo] + (sorted[hi] - sorted[lo]) * frac;
}

Distribution Describe(std::vector<double> values) {
  Distribution d;
  if (values.empty()) return d;
  std::sort(values.begin(), values.end());
  const double n = static_cast<double>(values.size());
  d.count = static_cast<int64_t>(values.size());
  d.mean = std::accumulate(values.begin(), values.end(), 0.0) / n;
  double ss = 0;
  for (double v : values) ss += (v - d.mean) * (v - d.mean);
  d.std = std::sqrt(ss / n);
  d.min = values.front();
  d.max = values.back();
  d.p50 = Percentile(values, 50);
  d.p90 = Percentile(values, 90);
  d.p99 = Percentile(values, 99);
  return d;
}

RequestTimings TimingsOf(const RequestRecord& r) {
  RequestTimings t;
  t.e2el = r.end - r.start;
  if (r.chunk_times.empty()) return t;
  t.ttft = r.chunk_times.front() - r.start;
  for (size_t i = 1; i < r.chunk_times.size(); ++i) {
    t.itl.push_back(r.chunk_times[i] - r.chunk_times[i - 1]);
  }
  if (r.output_tokens > 1) {
    t.tpot = (t.e2el - t.ttft) / static_cast<double>(r.output_tokens - 1);
  }
  return t;
}

Summary Summarize(const std::vector<RequestRecord>& records,
                  double duration_s) {
  Summary s;
  s.duration_s = duration_s;
  std::vector<double> ttft, tpot, itl, e2el;
  for (const RequestRecord& r : records) {
    ++s.status_counts[r.status];
    if (!r.ok()) {
      ++s.failed;
      continue;
    }
    ++s.completed;
    s.total_input_tokens += r.prompt_tokens;
    s.total_output_tokens += r.output_tokens;
    const RequestTimings t = TimingsOf(r);
    if (t.ttft >= 0) ttft.push_back(t.ttft);
    if (t.tpot >= 0) tpot.push_back(t.tpot);
    itl.insert(itl.end(), t.itl.begin(), t.itl.end());
    e2el.push_back(t.e2el);
  }
  if (duration_s > 0) {
    s.request_throughput = static_cast<double>(s.completed) / duration_s;
    s.output_throughput =
        static_cast<double>(s.total_output_tokens) / duration_s;
    s.total_token_throughput =
        static_cast<double>(s.total_input_tokens + s.total_output_tokens) /
        duration_s;
  }
  s.ttft_s = Describe(std::move(ttft));
  s.tpot_s = Describe(std::move(tpot));
  s.itl_s = Describe(std::move(itl));
  s.e2el_s = Describe(std::move(e2el));
  return s;
}

}  // namespace load
}  // namespace seqboat
