#include "metrics/metrics.h"

#include <algorithm>
#include <array>
#include <cassert>
#include <charconv>
#include <cmath>
#include <stdexcept>
#include <string_view>

namespace podshaper::metrics {

namespace {

enum Type { kCounter, kGauge, kHistogram };

constexpr std::string_view kTypeNames[] = {"counter", "gauge", "histogram"};

bool isAlpha(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z'); }
bool isDigit(char c) { return c >= '0' && c <= '9'; }

bool validMetricName(std::string_view s) {
  if (s.empty() || isDigit(s[0])) return false;
  return std::all_of(s.begin(), s.end(),
                     [](char c) { return isAlpha(c) || isDigit(c) || c == '_' || c == ':'; });
}

bool validLabelName(std::string_view s) {
  if (s.empty() || isDigit(s[0]) || s.substr(0, 2) == "__") return false;
  return std::all_of(s.begin(), s.end(),
                     [](char c) { return isAlpha(c) || isDigit(c) || c == '_'; });
}

void checkNames(const std::string& name, const Labels& labels, Type type) {
  if (!validMetricName(name)) {
    throw std::invalid_argument("metrics: \"" + name + "\" is not a valid metric name");
  }
  for (const auto& [label, value] : labels) {
    if (!validLabelName(label) || (type == kHistogram && label == "le")) {
      throw std::invalid_argument("metrics: \"" + label + "\" is not a valid label name for " +
                                  name);
    }
  }
}

void appendEscaped(std::string& out, std::string_view s, bool quotes) {
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
}

// {a="x",b="y"} (or nothing without labels); `le` goes last, as Prometheus writes it.
void appendLabels(std::string& out, const Labels& labels, std::string_view le = {}) {
  if (labels.empty() && le.empty()) return;
  out += '{';
  bool first = true;
  auto add = [&](std::string_view name, std::string_view value) {
    if (!first) out += ',';
    first = false;
    out += name;
    out += "=\"";
    appendEscaped(out, value, true);
    out += '"';
  };
  for (const auto& [name, value] : labels) add(name, value);
  if (!le.empty()) add("le", le);
  out += '}';
}

void appendSample(std::string& out, std::string_view name, std::string_view suffix,
                  const Labels& labels, double value, std::string_view le = {}) {
  out += name;
  out += suffix;
  appendLabels(out, labels, le);
  out += ' ';
  out += formatMetricValue(value);
  out += '\n';
}

std::vector<double> checkedBuckets(std::vector<double> bounds) {
  if (!bounds.empty() && std::isinf(bounds.back()) && bounds.back() > 0) bounds.pop_back();
  for (std::size_t i = 0; i < bounds.size(); ++i) {
    if (!std::isfinite(bounds[i]) || (i > 0 && !(bounds[i - 1] < bounds[i]))) {
      throw std::invalid_argument(
          "metrics: histogram buckets must be finite and strictly increasing");
    }
  }
  return bounds;
}

}  // namespace

std::string formatMetricValue(double v) {
  if (std::isnan(v)) return "NaN";
  if (std::isinf(v)) return v > 0 ? "+Inf" : "-Inf";
  if (v == 0) return "0";
  std::array<char, 64> buf{};
  double magnitude = std::fabs(v);
  // Plain decimals where they are readable (what Go's client writes for
  // these), exponents for the very small and the very large.
  auto format = (magnitude >= 1e-4 && magnitude < 1e15) ? std::chars_format::fixed
                                                         : std::chars_format::scientific;
  auto [end, ec] = std::to_chars(buf.data(), buf.data() + buf.size(), v, format);
  if (ec != std::errc()) return "NaN";
  return std::string(buf.data(), end);
}

void Counter::inc(double v) {
  assert(v >= 0 && "counters only go up");
  if (!(v >= 0)) return;
  value_.fetch_add(v, std::memory_order_relaxed);
}

Histogram::Histogram(std::vector<double> upperBounds)
    : upperBounds_(checkedBuckets(std::move(upperBounds))),
      counts_(new std::atomic<std::uint64_t>[upperBounds_.size() + 1]) {
  for (std::size_t i = 0; i <= upperBounds_.size(); ++i) counts_[i].store(0);
}

void Histogram::observe(double seconds) {
  // Bucket i counts values <= upperBounds_[i]; NaN falls into +Inf.
  std::size_t i = std::isnan(seconds)
                      ? upperBounds_.size()
                      : static_cast<std::size_t>(
                            std::lower_bound(upperBounds_.begin(), upperBounds_.end(), seconds) -
                            upperBounds_.begin());
  counts_[i].fetch_add(1, std::memory_order_relaxed);
  sum_.fetch_add(seconds, std::memory_order_relaxed);
}

Histogram::Snapshot Histogram::snapshot() const {
  Snapshot s;
  s.cumulative.reserve(upperBounds_.size() + 1);
  std::uint64_t running = 0;
  for (std::size_t i = 0; i <= upperBounds_.size(); ++i) {
    running += counts_[i].load(std::memory_order_relaxed);
    s.cumulative.push_back(running);
  }
  // _count is the +Inf bucket, so a scrape is self-consistent even while
  // observations race with it.
  s.count = running;
  s.sum = sum_.load(std::memory_order_relaxed);
  return s;
}

struct Registry::Family {
  std::string help;
  Type type;
  std::vector<double> buckets;  // histograms only
  std::map<Labels, std::unique_ptr<Counter>> counters;
  std::map<Labels, std::unique_ptr<Gauge>> gauges;
  std::map<Labels, std::unique_ptr<Histogram>> histograms;
};

Registry::Registry() = default;
Registry::~Registry() = default;

Registry::Family& Registry::family(const std::string& name, const std::string& help, int type,
                                 const Labels& labels) {
  checkNames(name, labels, static_cast<Type>(type));
  auto& slot = families_[name];
  if (!slot) {
    slot = std::make_unique<Family>();
    slot->help = help;
    slot->type = static_cast<Type>(type);
  } else if (slot->type != type) {
    throw std::logic_error("metrics: " + name + " is already registered as a " +
                           std::string(kTypeNames[slot->type]));
  }
  return *slot;
}

Counter& Registry::counter(const std::string& name, const std::string& help,
                          const Labels& labels) {
  std::lock_guard lock(mutex_);
  auto& series = family(name, help, kCounter, labels).counters[labels];
  if (!series) series = std::make_unique<Counter>();
  return *series;
}

Gauge& Registry::gauge(const std::string& name, const std::string& help, const Labels& labels) {
  std::lock_guard lock(mutex_);
  auto& series = family(name, help, kGauge, labels).gauges[labels];
  if (!series) series = std::make_unique<Gauge>();
  return *series;
}

Histogram& Registry::histogram(const std::string& name, const std::string& help,
                              std::vector<double> buckets, const Labels& labels) {
  buckets = checkedBuckets(std::move(buckets));
  std::lock_guard lock(mutex_);
  Family& f = family(name, help, kHistogram, labels);
  if (f.histograms.empty()) {
    f.buckets = buckets;
  } else if (f.buckets != buckets) {
    throw std::logic_error("metrics: histogram " + name +
                           " is already registered with other buckets");
  }
  auto& series = f.histograms[labels];
  if (!series) series = std::make_unique<Histogram>(std::move(buckets));
  return *series;
}

std::string Registry::render() const {
  std::lock_guard lock(mutex_);
  std::string out;
  for (const auto& [name, f] : families_) {
    out += "# HELP ";
    out += name;
    out += ' ';
    appendEscaped(out, f->help, false);
    out += "\n# TYPE ";
    out += name;
    out += ' ';
    out += kTypeNames[f->type];
    out += '\n';
    for (const auto& [labels, c] : f->counters) appendSample(out, name, "", labels, c->value());
    for (const auto& [labels, g] : f->gauges) appendSample(out, name, "", labels, g->value());
    for (const auto& [labels, h] : f->histograms) {
      Histogram::Snapshot s = h->snapshot();
      const auto& bounds = h->upperBounds();
      for (std::size_t i = 0; i < bounds.size(); ++i) {
        appendSample(out, name, "_bucket", labels, static_cast<double>(s.cumulative[i]),
                     formatMetricValue(bounds[i]));
      }
      appendSample(out, name, "_bucket", labels, static_cast<double>(s.count), "+Inf");
      appendSample(out, name, "_sum", labels, s.sum);
      appendSample(out, name, "_count", labels, static_cast<double>(s.count));
    }
  }
  return out;
}

}  // namespace podshaper::metrics
