#pragma once

// The reports' controller: a GPUTopologyReport and the Node of its name, judged together
// by the Reconciler under the TopologyPolicies in effect. Reports and Nodes share names:
// either one changing queues that node.

#include <functional>
#include <mutex>
#include <string>
#include <vector>

#include "api/policy.h"
#include "metrics/metrics.h"
#include "operator/caches.h"
#include "operator/reconciler.h"
#include "operator/runner.h"

namespace podshaper::op {

class ReportController {
 public:
  ReportController(const Cache& reports, const Cache& nodes, const Cache& policies, ReconcileApi& api,
                   const Clock& clock, metrics::Registry& metrics, std::function<bool()> mayWrite,
                   ReconcilerOptions options, RunnerOptions runner);

  void changed(const std::vector<std::string>& keys);
  // Every report and every Node.
  void enqueueAll();
  // Reads the policies again; false when their specs did not change (a status write).
  bool reloadPolicies();
  void forgetVerdicts() { reconciler_.forgetVerdicts(); }
  Runner& runner() { return runner_; }

 private:
  Reconciler::Result reconcile(const std::string& key);
  std::vector<Policy> policies() const;

  const Cache &reports_, &nodes_, &policyCache_;
  Reconciler reconciler_;
  mutable std::mutex mu_;  // guards policies_ and policySpecs_
  std::vector<Policy> policies_;
  std::string policySpecs_;  // policySpecsKey of the policies read
  metrics::Gauge &policiesGauge_, &policyErrors_;
  Runner runner_;  // last: its workers stop before the rest goes
};

}  // namespace podshaper::op
