#include "operator/runner.h"

#include <chrono>
#include <exception>

#include "cli/logging.h"

namespace podshaper::op {

Runner::Runner(RunnerOptions options, metrics::Registry& metrics, Reconcile reconcile)
    : options_(std::move(options)),
      reconcile_(std::move(reconcile)),
      queue_(std::chrono::milliseconds(50), std::chrono::seconds(60), options_.now),
      ok_(metrics.counter("podshaper_operator_reconciles_total", "Reconciles of one key, by controller and result.",
                          {{"controller", options_.name}, {"result", "ok"}})),
      error_(metrics.counter("podshaper_operator_reconciles_total", "",
                             {{"controller", options_.name}, {"result", "error"}})),
      notLeader_(metrics.counter("podshaper_operator_reconciles_total", "",
                                 {{"controller", options_.name}, {"result", "not_leader"}})),
      depth_(metrics.gauge("podshaper_operator_queue_depth", "Keys waiting to be reconciled, by controller.",
                           {{"controller", options_.name}})),
      duration_(metrics.histogram("podshaper_operator_reconcile_duration_seconds",
                                  "Time to reconcile one key, API writes included, by controller.",
                                  {0.0001, 0.0005, 0.001, 0.005, 0.01, 0.05, 0.1, 0.5, 1, 5},
                                  {{"controller", options_.name}})) {}

Runner::~Runner() { stop(); }

void Runner::start(int workers) {
  for (int i = 0; i < workers; ++i) {
    workers_.emplace_back([this] {
      while (auto key = queue_.get()) process(*key);
    });
  }
}

void Runner::stop() {
  queue_.shutDown();
  for (auto& t : workers_) t.join();
  workers_.clear();
}

bool Runner::processOne() {
  auto key = queue_.tryGet();
  if (!key) return false;
  process(*key);
  return true;
}

int Runner::drain() {
  int n = 0;
  while (processOne()) ++n;
  return n;
}

void Runner::process(const std::string& key) {
  depth_.set(static_cast<double>(queue_.depth()));
  const auto start = std::chrono::steady_clock::now();
  Reconciler::Result result{Reconciler::Outcome::Retry, std::nullopt};
  try {
    result = reconcile_(key);
  } catch (const std::exception& e) {
    cli::logger(options_.name).error({{options_.name, key}}, "{}", e.what());
  }
  duration_.observe(std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
  switch (result.outcome) {
    case Reconciler::Outcome::Done:
      ok_.inc();
      queue_.forget(key);
      if (result.requeueAfter) queue_.addAfter(key, *result.requeueAfter);
      break;
    case Reconciler::Outcome::NotLeader:
      notLeader_.inc();  // the new leader queues everything when it starts
      queue_.forget(key);
      break;
    case Reconciler::Outcome::Retry:
      error_.inc();
      queue_.retry(key);
      break;
  }
  queue_.done(key);
  depth_.set(static_cast<double>(queue_.depth()));
}

}  // namespace podshaper::op
