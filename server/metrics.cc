#include "server/metrics.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <utility>

#include "absl/strings/str_cat.h"

namespace seqboat {
namespace {

// Label values escape backslash, double quote and newline; HELP text escapes
// backslash and newline.
std::string Escape(const std::string& s, bool quotes) {
  std::string out;
  out.reserve(s.size());
  for (char c : s) {
    if (c == '\\') {
      out += "\\\\";
    } else if (c == '\n') {
      out += "\\n";
    } else if (c == '"' && quotes) {
      out += "\\\"";
    } else {
      out += c;
    }
  }
  return out;
}

std::string Labels(const std::vector<std::string>& names,
                   const std::vector<std::string>& values) {
  if (names.empty()) return "";
  std::string out = "{";
  for (size_t i = 0; i < names.size(); ++i) {
    if (i > 0) out += ",";
    absl::StrAppend(&out, names[i], "=\"", Escape(values[i], true), "\"");
  }
  return out + "}";
}

}  // namespace

std::string FormatMetricValue(double value) {
  if (std::isnan(value)) return "NaN";
  if (std::isinf(value)) return value > 0 ? "+Inf" : "-Inf";
  // Integers print without exponent or decimals (counters mostly are).
  if (value == std::floor(value) && std::fabs(value) < 1e15) {
    return absl::StrCat(static_cast<int64_t>(value));
  }
  char buf[32];
  for (int precision = 6; precision <= 17; ++precision) {
    std::snprintf(buf, sizeof(buf), "%.*g", precision, value);
    if (std::strtod(buf, nullptr) == value) break;
  }
  return buf;
}

std::vector<double> ExponentialBuckets(double start, double factor, int count) {
  std::vector<double> bounds;
  double b = start;
  for (int i = 0; i < count; ++i, b *= factor) bounds.push_back(b);
  return bounds;
}

void Counter::Add(const std::vector<std::string>& label_values, double amount) {
  if (label_values.size() != label_names_.size() || !(amount >= 0)) return;
  absl::MutexLock lock(&mu_);
  values_[label_values] += amount;
}

double Counter::Value(const std::vector<std::string>& label_values) const {
  absl::MutexLock lock(&mu_);
  auto it = values_.find(label_values);
  return it == values_.end() ? 0.0 : it->second;
}

Histogram::Histogram(std::vector<double> upper_bounds,
                     std::vector<std::string> label_names)
    : upper_bounds_([&] {
        std::sort(upper_bounds.begin(), upper_bounds.end());
        upper_bounds.erase(
            std::unique(upper_bounds.begin(), upper_bounds.end()),
            upper_bounds.end());
        // +Inf is implicit; a NaN bound would make every comparison false.
        upper_bounds.erase(
            std::remove_if(
                upper_bounds.begin(), upper_bounds.end(),
                [](double b) { return std::isnan(b) || std::isinf(b); }),
            upper_bounds.end());
        return upper_bounds;
      }()),
      label_names_(std::move(label_names)) {
  // Without labels the one series shows its zero buckets from the start.
  if (label_names_.empty()) Declare({});
}

void Histogram::Declare(const std::vector<std::string>& label_values) {
  if (label_values.size() != label_names_.size()) return;
  absl::MutexLock lock(&mu_);
  Cells& cells = cells_[label_values];
  if (cells.counts.empty()) cells.counts.assign(upper_bounds_.size() + 1, 0);
}

void Histogram::Observe(const std::vector<std::string>& label_values,
                        double value) {
  if (std::isnan(value) || label_values.size() != label_names_.size()) return;
  // Prometheus buckets are "less than or equal": lower_bound finds the first
  // bound >= value.
  const size_t bucket = static_cast<size_t>(
      std::lower_bound(upper_bounds_.begin(), upper_bounds_.end(), value) -
      upper_bounds_.begin());
  absl::MutexLock lock(&mu_);
  Cells& cells = cells_[label_values];
  if (cells.counts.empty()) cells.counts.assign(upper_bounds_.size() + 1, 0);
  ++cells.counts[bucket];
  cells.sum += value;
  ++cells.count;
}

Histogram::Snapshot Histogram::SnapshotOf(const Cells& cells) const {
  Snapshot s;
  s.upper_bounds = upper_bounds_;
  uint64_t running = 0;
  for (uint64_t c : cells.counts) {
    running += c;
    s.cumulative_counts.push_back(running);
  }
  s.sum = cells.sum;
  s.count = cells.count;
  return s;
}

Histogram::Snapshot Histogram::Read(
    const std::vector<std::string>& label_values) const {
  absl::MutexLock lock(&mu_);
  auto it = cells_.find(label_values);
  if (it != cells_.end()) return SnapshotOf(it->second);
  Cells empty;
  empty.counts.assign(upper_bounds_.size() + 1, 0);
  return SnapshotOf(empty);
}

Counter* MetricsRegistry::AddCounter(const std::string& name,
                                     const std::string& help,
                                     std::vector<std::string> label_names) {
  auto family = std::make_unique<Family>();
  family->name = name;
  family->help = help;
  family->type = "counter";
  family->counter.reset(new Counter(std::move(label_names)));
  Counter* counter = family->counter.get();
  absl::MutexLock lock(&mu_);
  families_.push_back(std::move(family));
  return counter;
}

Histogram* MetricsRegistry::AddHistogram(const std::string& name,
                                         const std::string& help,
                                         std::vector<double> upper_bounds,
                                         std::vector<std::string> label_names) {
  auto family = std::make_unique<Family>();
  family->name = name;
  family->help = help;
  family->type = "histogram";
  family->histogram.reset(
      new Histogram(std::move(upper_bounds), std::move(label_names)));
  Histogram* histogram = family->histogram.get();
  absl::MutexLock lock(&mu_);
  families_.push_back(std::move(family));
  return histogram;
}

void MetricsRegistry::AddGauge(const std::string& name, const std::string& help,
                               std::function<double()> read) {
  auto family = std::make_unique<Family>();
  family->name = name;
  family->help = help;
  family->type = "gauge";
  family->gauge = std::move(read);
  absl::MutexLock lock(&mu_);
  families_.push_back(std::move(family));
}

void MetricsRegistry::AddCounterReading(const std::string& name,
                                        const std::string& help,
                                        std::function<double()> read) {
  auto family = std::make_unique<Family>();
  family->name = name;
  family->help = help;
  family->type = "counter";
  family->gauge = std::move(read);  // rendered like a gauge, typed counter
  absl::MutexLock lock(&mu_);
  families_.push_back(std::move(family));
}

void MetricsRegistry::AddLabelledReadings(
    const std::string& name, const std::string& help, const std::string& type,
    const std::string& label, std::function<LabelledReadings()> read) {
  auto family = std::make_unique<Family>();
  family->name = name;
  family->help = help;
  family->type = type;
  family->label = label;
  family->readings = std::move(read);
  absl::MutexLock lock(&mu_);
  families_.push_back(std::move(family));
}

std::string MetricsRegistry::Render() const {
  std::string out;
  absl::MutexLock lock(&mu_);
  for (const auto& f : families_) {
    absl::StrAppend(&out, "# HELP ", f->name, " ", Escape(f->help, false),
                    "\n# TYPE ", f->name, " ", f->type, "\n");
    if (f->counter != nullptr) {
      const Counter& c = *f->counter;
      absl::MutexLock counter_lock(&c.mu_);
      // A counter without labels shows 0 before its first increment, so a
      // rate() over it starts at the process start, not at the first event.
      if (c.label_names_.empty() && c.values_.empty()) {
        absl::StrAppend(&out, f->name, " 0\n");
      }
      for (const auto& [values, value] : c.values_) {
        absl::StrAppend(&out, f->name, Labels(c.label_names_, values), " ",
                        FormatMetricValue(value), "\n");
      }
    } else if (f->histogram != nullptr) {
      const Histogram& h = *f->histogram;
      absl::MutexLock histogram_lock(&h.mu_);
      for (const auto& [values, cells] : h.cells_) {
        const Histogram::Snapshot s = h.SnapshotOf(cells);
        // `le` goes after the histogram's own labels.
        std::string labels = Labels(h.label_names_, values);
        labels =
            labels.empty() ? "{" : labels.substr(0, labels.size() - 1) + ",";
        for (size_t i = 0; i <= s.upper_bounds.size(); ++i) {
          const std::string le = i < s.upper_bounds.size()
                                     ? FormatMetricValue(s.upper_bounds[i])
                                     : "+Inf";
          absl::StrAppend(&out, f->name, "_bucket", labels, "le=\"", le, "\"} ",
                          s.cumulative_counts[i], "\n");
        }
        const std::string own = Labels(h.label_names_, values);
        absl::StrAppend(&out, f->name, "_sum", own, " ",
                        FormatMetricValue(s.sum), "\n", f->name, "_count", own,
                        " ", s.count, "\n");
      }
    } else if (f->gauge) {
      absl::StrAppend(&out, f->name, " ", FormatMetricValue(f->gauge()), "\n");
    } else if (f->readings) {
      for (const auto& [value_of_label, value] : f->readings()) {
        absl::StrAppend(&out, f->name, Labels({f->label}, {value_of_label}),
                        " ", FormatMetricValue(value), "\n");
      }
    }
  }
  return out;
}

}  // namespace seqboat
