#pragma once

// The reports' controller: a GPUTopologyReport and the Node of its name, judged together
// by the Reconciler under the TopologyPolicies in effect, with the shaped pods' containers
// podshaper-shm holds back there for their memlock. Reports and Nodes share names: either
// one changing queues that node, and so does a shaped pod on it starting or stopping to be
// held.

#include <functional>
#include <map>
#include <mutex>
#include <string>
#include <vector>

#include "api/policy.h"
#include "judging/memlock_held.h"
#include "metrics/metrics.h"
#include "operator/caches.h"
#include "operator/reconciler.h"
#include "operator/runner.h"

namespace podshaper::op {

class ReportController {
 public:
  ReportController(const Cache& reports, const Cache& nodes, const Cache& policies, const Cache& pods,
                   ReconcileApi& api, const Clock& clock, metrics::Registry& metrics,
                   std::function<bool()> mayWrite, ReconcilerOptions options, RunnerOptions runner);

  void changed(const std::vector<std::string>& keys);
  // Shaped pods changed (their store keys): the node of one that starts or stops being held
  // for its memlock, or whose held containers change, is queued.
  void podsChanged(const std::vector<std::string>& keys);
  // Every report and every Node.
  void enqueueAll();
  // Reads the policies again; false when their specs did not change (a status write).
  bool reloadPolicies();
  void forgetVerdicts() { reconciler_.forgetVerdicts(); }
  Runner& runner() { return runner_; }

 private:
  Reconciler::Result reconcile(const std::string& key);
  std::vector<Policy> policies() const;
  // The held containers on `node`, sorted by pod.
  std::vector<MemlockHeld> heldOn(const std::string& node) const;

  const Cache &reports_, &nodes_, &policyCache_, &pods_;
  Reconciler reconciler_;
  mutable std::mutex mu_;  // guards policies_, policySpecs_ and the held pods
  std::vector<Policy> policies_;
  std::string policySpecs_;  // policySpecsKey of the policies read
  // The shaped pods with held containers, by store key: their node and what is held. Most
  // pods never are: a pod event costs a look at that pod, and a judgement reads its node's
  // entries alone.
  struct HeldPod {
    std::string node;
    std::vector<MemlockHeld> held;
  };
  std::map<std::string, HeldPod> heldPods_;
  std::map<std::string, std::map<std::string, const HeldPod*>> heldByNode_;  // node → pod key → heldPods_'s
  metrics::Gauge &policiesGauge_, &policyErrors_;
  Runner runner_;  // last: its workers stop before the rest goes
};

}  // namespace podshaper::op
