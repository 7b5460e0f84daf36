#include "metrics/metrics.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <stdexcept>
#include <thread>
#include <vector>

namespace podshaper::metrics {
namespace {

TEST(MetricsTest, EmptyRegistryRendersNothing) {
  Registry m;
  EXPECT_EQ(m.render(), "");
}

TEST(MetricsTest, CounterWithoutLabels) {
  Registry m;
  m.counter("podshaper_tls_certificate_reloads_total", "Reloads.").inc();
  m.counter("podshaper_tls_certificate_reloads_total", "Reloads.").inc(2);
  EXPECT_EQ(m.render(),
            "# HELP podshaper_tls_certificate_reloads_total Reloads.\n"
            "# TYPE podshaper_tls_certificate_reloads_total counter\n"
            "podshaper_tls_certificate_reloads_total 3\n");
}

TEST(MetricsTest, SeriesOfOneFamilyShareOneHeaderAndAreSortedByLabels) {
  Registry m;
  m.counter("requests_total", "Requests.", {{"path", "/mutate"}, {"code", "200"}}).inc(5);
  m.counter("requests_total", "Requests.", {{"path", "/healthz"}, {"code", "200"}}).inc();
  m.counter("requests_total", "Requests.", {{"code", "404"}, {"path", "other"}}).inc();
  EXPECT_EQ(m.render(),
            "# HELP requests_total Requests.\n"
            "# TYPE requests_total counter\n"
            "requests_total{code=\"200\",path=\"/healthz\"} 1\n"
            "requests_total{code=\"200\",path=\"/mutate\"} 5\n"
            "requests_total{code=\"404\",path=\"other\"} 1\n");
}

TEST(MetricsTest, SameNameAndLabelsGiveTheSameObject) {
  Registry m;
  Counter& a = m.counter("c_total", "C.", {{"k", "v"}});
  Counter& b = m.counter("c_total", "other help is ignored", {{"k", "v"}});
  Counter& c = m.counter("c_total", "C.", {{"k", "w"}});
  EXPECT_EQ(&a, &b);
  EXPECT_NE(&a, &c);
  Histogram& h1 = m.histogram("h_seconds", "H.", {0.1, 1}, {{"path", "/a"}});
  Histogram& h2 = m.histogram("h_seconds", "H.", {0.1, 1}, {{"path", "/a"}});
  EXPECT_EQ(&h1, &h2);
  EXPECT_EQ(&m.gauge("g", "G."), &m.gauge("g", "G."));
}

TEST(MetricsTest, GaugeSetIncDec) {
  Registry m;
  Gauge& g = m.gauge("podshaper_http_connections_active", "Open connections.");
  g.set(10);
  g.inc();
  g.dec(3);
  EXPECT_EQ(m.render(),
            "# HELP podshaper_http_connections_active Open connections.\n"
            "# TYPE podshaper_http_connections_active gauge\n"
            "podshaper_http_connections_active 8\n");
}

TEST(MetricsTest, HistogramBucketsAreCumulativeWithInfSumAndCount) {
  Registry m;
  Histogram& h = m.histogram("d_seconds", "Durations.", {0.0005, 0.01, 2.5}, {{"path", "/x"}});
  h.observe(0.0001);
  h.observe(0.0005);  // on a bound: counts in that bucket ("le")
  h.observe(0.002);
  h.observe(3);
  EXPECT_EQ(m.render(),
            "# HELP d_seconds Durations.\n"
            "# TYPE d_seconds histogram\n"
            "d_seconds_bucket{path=\"/x\",le=\"0.0005\"} 2\n"
            "d_seconds_bucket{path=\"/x\",le=\"0.01\"} 3\n"
            "d_seconds_bucket{path=\"/x\",le=\"2.5\"} 3\n"
            "d_seconds_bucket{path=\"/x\",le=\"+Inf\"} 4\n"
            "d_seconds_sum{path=\"/x\"} 3.0026\n"
            "d_seconds_count{path=\"/x\"} 4\n");
}

TEST(MetricsTest, HistogramWithoutLabelsAndAnExplicitInfBound) {
  Registry m;
  m.histogram("h", "H.", {1, std::numeric_limits<double>::infinity()}).observe(0.5);
  EXPECT_EQ(m.render(),
            "# HELP h H.\n"
            "# TYPE h histogram\n"
            "h_bucket{le=\"1\"} 1\n"
            "h_bucket{le=\"+Inf\"} 1\n"
            "h_sum 0.5\n"
            "h_count 1\n");
}

TEST(MetricsTest, LabelValuesAndHelpAreEscaped) {
  Registry m;
  m.counter("e_total", "Help with \\ and\nnewline \"quotes\".",
            {{"v", "back\\slash \"quoted\"\nline"}})
      .inc();
  EXPECT_EQ(m.render(),
            "# HELP e_total Help with \\\\ and\\nnewline \"quotes\".\n"
            "# TYPE e_total counter\n"
            "e_total{v=\"back\\\\slash \\\"quoted\\\"\\nline\"} 1\n");
}

TEST(MetricsTest, FamiliesAreSortedByName) {
  Registry m;
  m.gauge("b", "B.").set(1);
  m.counter("a_total", "A.").inc();
  std::string text = m.render();
  EXPECT_LT(text.find("# HELP a_total"), text.find("# HELP b"));
}

TEST(MetricsTest, ValuesAreFormattedAsPrometheusReadsThem) {
  struct Case {
    double value;
    const char* text;
  };
  const Case cases[] = {
      {0, "0"},
      {42, "42"},
      {-3, "-3"},
      {0.0005, "0.0005"},
      {2.5, "2.5"},
      {0.1, "0.1"},
      {1e-5, "1e-05"},
      {1234567, "1234567"},
      {1e21, "1e+21"},
      {std::numeric_limits<double>::infinity(), "+Inf"},
      {-std::numeric_limits<double>::infinity(), "-Inf"},
      {std::nan(""), "NaN"},
  };
  for (const auto& c : cases) EXPECT_EQ(formatMetricValue(c.value), c.text) << c.value;
}

TEST(MetricsTest, CounterIgnoresNegativeIncrementsInRelease) {
#ifdef NDEBUG
  Registry m;
  Counter& c = m.counter("c_total", "C.");
  c.inc(-1);
  EXPECT_EQ(c.value(), 0);
#else
  GTEST_SKIP() << "asserts in debug builds";
#endif
}

TEST(MetricsTest, ProgrammingErrorsThrow) {
  Registry m;
  EXPECT_THROW(m.counter("bad-name", "x"), std::invalid_argument);
  EXPECT_THROW(m.counter("1starts_with_digit", "x"), std::invalid_argument);
  EXPECT_THROW(m.counter("ok_total", "x", {{"bad-label", "v"}}), std::invalid_argument);
  EXPECT_THROW(m.counter("ok_total", "x", {{"__reserved", "v"}}), std::invalid_argument);
  EXPECT_THROW(m.histogram("h", "x", {1}, {{"le", "1"}}), std::invalid_argument);
  EXPECT_THROW(m.histogram("h2", "x", {1, 0.5}), std::invalid_argument);
  m.counter("taken", "x");
  EXPECT_THROW(m.gauge("taken", "x"), std::logic_error);
  m.histogram("h3", "x", {1, 2});
  EXPECT_THROW(m.histogram("h3", "x", {1, 3}, {{"k", "v"}}), std::logic_error);
}

TEST(MetricsTest, ConcurrentUpdatesAreNotLost) {
  Registry m;
  Counter& c = m.counter("c_total", "C.");
  Histogram& h = m.histogram("h", "H.", {0.5});
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&] {
      for (int i = 0; i < 10000; ++i) {
        c.inc();
        h.observe(i % 2 == 0 ? 0.25 : 1.0);
        // Registration and rendering race with the updates too.
        if (i % 1000 == 0) m.counter("c_total", "C.", {{"n", std::to_string(i)}});
        if (i % 2500 == 0) (void)m.render();
      }
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(c.value(), 40000);
  Histogram::Snapshot s = h.snapshot();
  EXPECT_EQ(s.count, 40000u);
  EXPECT_EQ(s.cumulative[0], 20000u);
  EXPECT_DOUBLE_EQ(s.sum, 20000 * 0.25 + 20000 * 1.0);
}

}  // namespace
}  // namespace podshaper::metrics
