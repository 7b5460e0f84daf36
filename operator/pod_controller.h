#pragma once

// The shaped pods' controller (label podshaper.io/shaped=true): each explained by the
// PodReconciler, on a queue of its own so that thousands of pods never wait behind the
// reports, nor the reports behind them.

#include <chrono>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "metrics/metrics.h"
#include "operator/caches.h"
#include "operator/node_table.h"
#include "operator/pod_reconciler.h"
#include "operator/runner.h"

namespace podshaper::op {

class PodController {
 public:
  PodController(const Cache& pods, NodeTable& nodeTable, ReconcileApi& api, const Clock& clock,
                metrics::Registry& metrics, std::function<bool()> mayWrite, PodReconcilerOptions options,
                RunnerOptions runner);

  void changed(const std::vector<std::string>& keys);
  void enqueueAll();
  Runner& runner() { return runner_; }

 private:
  // The facts of every node with the shaped pods bound to it, for the pods that
  // wait: gathered at most once a second, as each waiting pod asks for them (every
  // pendingGrace, then every 30 s).
  std::shared_ptr<const std::vector<NodeFacts>> nodeFactsNow();

  const Cache& pods_;
  NodeTable& nodeTable_;
  PodReconciler reconciler_;
  std::mutex nodeFactsMu_;
  std::shared_ptr<const std::vector<NodeFacts>> nodeFacts_;
  WorkQueue::Clock::time_point nodeFactsAt_;
  Runner runner_;  // last: its workers stop before the rest goes
};

}  // namespace podshaper::op
