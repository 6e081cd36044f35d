#include "server/metrics.h"

#include <string>
#include <thread>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace seqboat {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

TEST(MetricsTest, CounterWithLabelsRendersEachCombination) {
  MetricsRegistry registry;
  Counter* c = registry.AddCounter("x_requests_total", "Requests.", {"code"});
  c->Add({"OK"}, 2);
  c->Add({"UNAVAILABLE"});
  c->Add({"OK"});
  EXPECT_EQ(c->Value({"OK"}), 3);
  EXPECT_EQ(registry.Render(),
            "# HELP x_requests_total Requests.\n"
            "# TYPE x_requests_total counter\n"
            "x_requests_total{code=\"OK\"} 3\n"
            "x_requests_total{code=\"UNAVAILABLE\"} 1\n");
}

TEST(MetricsTest, CounterIgnoresWrongArityAndNegativeAmounts) {
  MetricsRegistry registry;
  Counter* c = registry.AddCounter("y_total", "Y.", {"a"});
  c->Add({}, 1);
  c->Add({"p", "q"}, 1);
  c->Add({"p"}, -5);
  c->Add({"p"}, 0.5);
  EXPECT_EQ(c->Value({"p"}), 0.5);
  EXPECT_THAT(registry.Render(), HasSubstr("y_total{a=\"p\"} 0.5\n"));
}

TEST(MetricsTest, UnlabelledCounterShowsZeroBeforeFirstIncrement) {
  MetricsRegistry registry;
  registry.AddCounter("z_total", "Z.");
  EXPECT_THAT(registry.Render(), HasSubstr("\nz_total 0\n"));
}

TEST(MetricsTest, LabelValuesAndHelpAreEscaped) {
  MetricsRegistry registry;
  Counter* c = registry.AddCounter("e_total", "line1\nback\\slash", {"v"});
  c->Add({"a\"b\\c\nd"});
  const std::string text = registry.Render();
  EXPECT_THAT(text, HasSubstr("# HELP e_total line1\\nback\\\\slash\n"));
  EXPECT_THAT(text, HasSubstr("e_total{v=\"a\\\"b\\\\c\\nd\"} 1\n"));
}

TEST(MetricsTest, HistogramBucketsAreCumulativeAndInclusive) {
  MetricsRegistry registry;
  Histogram* h = registry.AddHistogram("h_seconds", "H.", {0.5, 0.1, 1.0});
  for (double v : {0.05, 0.1, 0.3, 1.0, 7.0}) h->Observe(v);
  EXPECT_EQ(registry.Render(),
            "# HELP h_seconds H.\n"
            "# TYPE h_seconds histogram\n"
            "h_seconds_bucket{le=\"0.1\"} 2\n"
            "h_seconds_bucket{le=\"0.5\"} 3\n"
            "h_seconds_bucket{le=\"1\"} 4\n"
            "h_seconds_bucket{le=\"+Inf\"} 5\n"
            "h_seconds_sum 8.45\n"
            "h_seconds_count 5\n");
}

TEST(MetricsTest, LabelledHistogramRendersEachCombinationWithLeLast) {
  MetricsRegistry registry;
  Histogram* h = registry.AddHistogram("l_seconds", "L.", {1.0}, {"side"});
  h->Declare({"b"});
  h->Observe({"a"}, 0.5);
  h->Observe({"a"}, 2.0);
  h->Observe({}, 0.5);          // wrong arity: ignored
  h->Observe({"a", "x"}, 0.5);  // likewise
  EXPECT_EQ(h->Read({"a"}).count, 2u);
  EXPECT_EQ(h->Read({"b"}).count, 0u);
  EXPECT_EQ(registry.Render(),
            "# HELP l_seconds L.\n"
            "# TYPE l_seconds histogram\n"
            "l_seconds_bucket{side=\"a\",le=\"1\"} 1\n"
            "l_seconds_bucket{side=\"a\",le=\"+Inf\"} 2\n"
            "l_seconds_sum{side=\"a\"} 2.5\n"
            "l_seconds_count{side=\"a\"} 2\n"
            "l_seconds_bucket{side=\"b\",le=\"1\"} 0\n"
            "l_seconds_bucket{side=\"b\",le=\"+Inf\"} 0\n"
            "l_seconds_sum{side=\"b\"} 0\n"
            "l_seconds_count{side=\"b\"} 0\n");
}

TEST(MetricsTest, HistogramDropsNaN) {
  MetricsRegistry registry;
  Histogram* h = registry.AddHistogram("n", "N.", {1.0});
  h->Observe(std::nan(""));
  EXPECT_EQ(h->Read().count, 0u);
}

TEST(MetricsTest, GaugeIsReadAtRenderTime) {
  MetricsRegistry registry;
  double value = 1;
  registry.AddGauge("g", "G.", [&value] { return value; });
  EXPECT_THAT(registry.Render(), HasSubstr("\ng 1\n"));
  value = 2.25;
  EXPECT_THAT(registry.Render(), HasSubstr("\ng 2.25\n"));
}

TEST(MetricsTest, CounterReadingIsTypedCounterAndReadAtRenderTime) {
  MetricsRegistry registry;
  double value = 3;
  registry.AddCounterReading("c_total", "C.", [&value] { return value; });
  EXPECT_THAT(registry.Render(), HasSubstr("# TYPE c_total counter\n"));
  EXPECT_THAT(registry.Render(), HasSubstr("\nc_total 3\n"));
  value = 7;
  EXPECT_THAT(registry.Render(), HasSubstr("\nc_total 7\n"));
}

TEST(MetricsTest, LabelledReadingsAreReadAtRenderTime) {
  MetricsRegistry registry;
  MetricsRegistry::LabelledReadings now = {{"1", 10}, {"3", 4}};
  registry.AddLabelledReadings("blk_total", "Per block.", "counter", "block",
                               [&now] { return now; });
  std::string text = registry.Render();
  EXPECT_THAT(text, HasSubstr("# TYPE blk_total counter\n"));
  EXPECT_THAT(text, HasSubstr("\nblk_total{block=\"1\"} 10\n"));
  EXPECT_THAT(text, HasSubstr("\nblk_total{block=\"3\"} 4\n"));
  now = {{"1", 12}};
  text = registry.Render();
  EXPECT_THAT(text, HasSubstr("\nblk_total{block=\"1\"} 12\n"));
  EXPECT_THAT(text, Not(HasSubstr("block=\"3\"")));
}

TEST(MetricsTest, FormatsSpecialValues) {
  EXPECT_EQ(FormatMetricValue(3), "3");
  EXPECT_EQ(FormatMetricValue(0.1), "0.1");
  EXPECT_EQ(FormatMetricValue(1.0 / 3),
            "0.3333333333333333");  // 16 digits round-trip
  EXPECT_EQ(FormatMetricValue(INFINITY), "+Inf");
  EXPECT_EQ(FormatMetricValue(-INFINITY), "-Inf");
  EXPECT_EQ(FormatMetricValue(std::nan("")), "NaN");
}

TEST(MetricsTest, ExponentialBuckets) {
  EXPECT_EQ(ExponentialBuckets(1, 2, 4), (std::vector<double>{1, 2, 4, 8}));
}

TEST(MetricsTest, ConcurrentUpdatesAreAllCounted) {
  MetricsRegistry registry;
  Counter* c = registry.AddCounter("c_total", "C.", {"t"});
  Histogram* h = registry.AddHistogram("h", "H.", {1.0});
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&] {
      for (int i = 0; i < 10000; ++i) {
        c->Add({"x"});
        h->Observe(0.5);
      }
    });
  }
  // Rendering meanwhile must not disturb the counts.
  for (int i = 0; i < 10; ++i) EXPECT_THAT(registry.Render(), Not(""));
  for (auto& th : threads) th.join();
  EXPECT_EQ(c->Value({"x"}), 40000);
  EXPECT_EQ(h->Read().count, 40000u);
  EXPECT_EQ(h->Read().cumulative_counts[0], 40000u);
}

}  // namespace
}  // namespace seqboat
