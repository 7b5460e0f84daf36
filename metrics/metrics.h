#pragma once

// A small Prometheus registry: counters, gauges and fixed-bucket histograms,
// rendered in the text exposition format 0.0.4 for /metrics.
//
// Registration (counter(), gauge(), histogram()) takes a lock and is meant to
// happen once per series; keep the returned reference. Updating a series
// (inc, set, observe) is lock-free: relaxed atomics only.

#include <atomic>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

namespace podshaper::metrics {

using Labels = std::map<std::string, std::string>;

class Counter {
 public:
  // Counters only go up: a negative or NaN increment is a bug and is ignored.
  void inc(double v = 1);
  double value() const { return value_.load(std::memory_order_relaxed); }

 private:
  std::atomic<double> value_{0};
};

class Gauge {
 public:
  void set(double v) { value_.store(v, std::memory_order_relaxed); }
  void inc(double v = 1) { value_.fetch_add(v, std::memory_order_relaxed); }
  void dec(double v = 1) { value_.fetch_sub(v, std::memory_order_relaxed); }
  double value() const { return value_.load(std::memory_order_relaxed); }

 private:
  std::atomic<double> value_{0};
};

class Histogram {
 public:
  // `upperBounds` must be finite and strictly increasing; +Inf is implicit.
  explicit Histogram(std::vector<double> upperBounds);

  void observe(double seconds);

  struct Snapshot {
    std::vector<std::uint64_t> cumulative;  // one per upper bound, then +Inf
    double sum = 0;
    std::uint64_t count = 0;
  };
  Snapshot snapshot() const;
  const std::vector<double>& upperBounds() const { return upperBounds_; }

 private:
  std::vector<double> upperBounds_;
  std::unique_ptr<std::atomic<std::uint64_t>[]> counts_;  // per bucket, not cumulative
  std::atomic<double> sum_{0};
};

class Registry {
 public:
  Registry();
  ~Registry();
  Registry(const Registry&) = delete;
  Registry& operator=(const Registry&) = delete;

  // The same name and labels give the same object. A name must be
  // [a-zA-Z_:][a-zA-Z0-9_:]*; label names [a-zA-Z_][a-zA-Z0-9_]* and not
  // "__"-prefixed; a histogram may not use "le". Breaking these, or asking for
  // an existing family as another type (or a histogram with other buckets),
  // is a programming error and throws std::invalid_argument / std::logic_error.
  // The first help text given for a family is kept.
  Counter& counter(const std::string& name, const std::string& help, const Labels& labels = {});
  Gauge& gauge(const std::string& name, const std::string& help, const Labels& labels = {});
  Histogram& histogram(const std::string& name, const std::string& help,
                       std::vector<double> buckets, const Labels& labels = {});

  // Families sorted by name, series by labels; # HELP and # TYPE once per family.
  std::string render() const;

 private:
  struct Family;
  Family& family(const std::string& name, const std::string& help, int type,
                 const Labels& labels);

  mutable std::mutex mutex_;
  std::map<std::string, std::unique_ptr<Family>> families_;
};

// How render() writes a sample value: "0", "42", "0.0005", "2.5", "1e-05",
// "+Inf", "NaN". Exposed for tests and for callers composing their own lines.
std::string formatMetricValue(double v);

}  // namespace podshaper::metrics
