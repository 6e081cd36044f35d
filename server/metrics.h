// A small thread-safe metrics registry that renders the Prometheus text
// exposition format (version 0.0.4). Owned by main and passed to whoever
// records; no global state. Metrics are created once at start-up and live as
// long as the registry, so recording is a pointer call without lookups.
#ifndef SEQBOAT_SERVER_METRICS_H_
#define SEQBOAT_SERVER_METRICS_H_

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/synchronization/mutex.h"

namespace seqboat {

// A monotonically increasing value per combination of label values.
class Counter {
 public:
  // `label_values` must have one entry per label name given at creation;
  // a mismatch is ignored (never aborts). Negative increments are ignored.
  void Add(const std::vector<std::string>& label_values, double amount = 1.0);
  // Shorthand for a counter without labels.
  void Increment(double amount = 1.0) { Add({}, amount); }
  double Value(const std::vector<std::string>& label_values) const;

 private:
  friend class MetricsRegistry;
  explicit Counter(std::vector<std::string> label_names)
      : label_names_(std::move(label_names)) {}

  const std::vector<std::string> label_names_;
  mutable absl::Mutex mu_;
  std::map<std::vector<std::string>, double> values_ ABSL_GUARDED_BY(mu_);
};

// Cumulative buckets with fixed upper bounds, plus sum and count, per
// combination of label values (like Counter).
class Histogram {
 public:
  // `label_values` must have one entry per label name given at creation; a
  // mismatch is ignored (never aborts).
  void Observe(const std::vector<std::string>& label_values, double value);
  // Shorthand for a histogram without labels.
  void Observe(double value) { Observe({}, value); }
  // Makes the series exist (all zero) before its first observation, so a
  // rate() over it starts at the process start.
  void Declare(const std::vector<std::string>& label_values);

  struct Snapshot {
    std::vector<double> upper_bounds;         // ascending, without +Inf
    std::vector<uint64_t> cumulative_counts;  // one per bound, then +Inf
    double sum = 0;
    uint64_t count = 0;
  };
  Snapshot Read(const std::vector<std::string>& label_values = {}) const;

 private:
  friend class MetricsRegistry;
  Histogram(std::vector<double> upper_bounds,
            std::vector<std::string> label_names);

  struct Cells {
    // Per-bucket (not cumulative) counts; the last one is the +Inf bucket.
    std::vector<uint64_t> counts;
    double sum = 0;
    uint64_t count = 0;
  };
  Snapshot SnapshotOf(const Cells& cells) const;

  const std::vector<double> upper_bounds_;
  const std::vector<std::string> label_names_;
  mutable absl::Mutex mu_;
  std::map<std::vector<std::string>, Cells> cells_ ABSL_GUARDED_BY(mu_);
};

class MetricsRegistry {
 public:
  MetricsRegistry() = default;
  MetricsRegistry(const MetricsRegistry&) = delete;
  MetricsRegistry& operator=(const MetricsRegistry&) = delete;

  // Each returns a pointer valid for the registry's lifetime. Names must be
  // unique; families render in the order they were added.
  Counter* AddCounter(const std::string& name, const std::string& help,
                      std::vector<std::string> label_names = {});
  Histogram* AddHistogram(const std::string& name, const std::string& help,
                          std::vector<double> upper_bounds,
                          std::vector<std::string> label_names = {});
  // A gauge read when scraped (e.g. from the engine's stats), so it is never
  // stale and nothing has to push it.
  void AddGauge(const std::string& name, const std::string& help,
                std::function<double()> read);
  // A counter kept elsewhere (the engine's), read when scraped.
  void AddCounterReading(const std::string& name, const std::string& help,
                         std::function<double()> read);
  // Values kept elsewhere (the engine's per-block counters), read when
  // scraped, one sample per value of one label. `type` is "counter" or
  // "gauge".
  using LabelledReadings = std::vector<std::pair<std::string, double>>;
  void AddLabelledReadings(const std::string& name, const std::string& help,
                           const std::string& type, const std::string& label,
                           std::function<LabelledReadings()> read);

  // Every metric in the text exposition format.
  std::string Render() const;

 private:
  struct Family {
    std::string name;
    std::string help;
    std::string type;  // counter, histogram or gauge
    std::unique_ptr<Counter> counter;
    std::unique_ptr<Histogram> histogram;
    std::function<double()> gauge;
    std::string label;  // of readings
    std::function<LabelledReadings()> readings;
  };
  mutable absl::Mutex mu_;
  std::vector<std::unique_ptr<Family>> families_ ABSL_GUARDED_BY(mu_);
};

// Bucket bounds start, start*factor, ... (count of them), like Prometheus
// client libraries' ExponentialBuckets.
std::vector<double> ExponentialBuckets(double start, double factor, int count);

// A sample value as the text format writes it: shortest round-trip decimal,
// "+Inf", "-Inf" or "NaN".
std::string FormatMetricValue(double value);

}  // namespace seqboat

#endif  // SEQBOAT_SERVER_METRICS_H_
