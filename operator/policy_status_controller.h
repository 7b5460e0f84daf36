#pragma once

// The TopologyPolicies' status (judging/policy_status.h: the nodes each selects, validates,
// fails), written where it changed: a controller of one key, looked at every
// kPolicyStatusPeriod and soon after a policy, a report or a Node changed, at most once per
// kPolicyStatusGap however many change.

#include <atomic>
#include <chrono>
#include <functional>
#include <set>
#include <string>

#include "metrics/metrics.h"
#include "operator/caches.h"
#include "operator/node_table.h"
#include "operator/reconciler.h"
#include "operator/runner.h"

namespace podshaper::op {

inline constexpr auto kPolicyStatusPeriod = std::chrono::seconds(15);
inline constexpr auto kPolicyStatusGap = std::chrono::seconds(2);

class PolicyStatusController {
 public:
  // Its one key.
  static constexpr const char* kKey = "topologypolicies";

  PolicyStatusController(const Cache& policies, NodeTable& nodeTable, ReconcileApi& api, const Clock& clock,
                         metrics::Registry& metrics, std::function<bool()> mayWrite, RunnerOptions runner);

  // A policy, a report or a Node changed: look again kPolicyStatusGap after the last look.
  void changed();
  void enqueue() { runner_.add(kKey); }
  Runner& runner() { return runner_; }

 private:
  Reconciler::Result reconcile();

  const Cache& policies_;
  NodeTable& nodeTable_;
  ReconcileApi& api_;
  const Clock& clock_;
  const std::function<bool()> mayWrite_;
  std::set<std::string> withoutStatus_;  // policies told once of a CRD without the status subresource
  std::atomic<WorkQueue::Clock::rep> lastLook_{0};  // the queue clock's ticks
  metrics::Counter& writes_;
  Runner runner_;  // last: its workers stop before the rest goes
};

}  // namespace podshaper::op
