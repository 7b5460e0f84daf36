#pragma once

// The operator's controller: three informers (GPUTopologyReports, Nodes,
// TopologyPolicies), the work queue, its workers and a periodic resync. On any
// change of a report, its Node or a policy, the name is queued; a worker hands
// what the caches hold to the Reconciler and does what it answers: forget,
// retry with backoff, or look again later.

#include <atomic>
#include <condition_variable>
#include <functional>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "api/policy.h"
#include "kube/client.h"
#include "kube/informer.h"
#include "metrics/metrics.h"
#include "operator/config.h"
#include "operator/node_table.h"
#include "operator/pod_reconciler.h"
#include "operator/reconciler.h"
#include "operator/work_queue.h"

namespace podshaper::op {

// What the operator keeps of a Node (an informer transform): name, uid, resourceVersion,
// labels, taints, cordon, podshaper's own condition and allocatable; what prune reads too.
void compactNode(nlohmann::json& node);

// ReconcileApi through the Kubernetes API.
class KubeReconcileApi : public ReconcileApi {
 public:
  explicit KubeReconcileApi(const kube::Client& client) : client_(client) {}
  kube::ApiResult<nlohmann::json> patchReportStatus(const std::string& name, const nlohmann::json& body) override;
  kube::ApiResult<nlohmann::json> patchNode(const std::string& name, const nlohmann::json& patch) override;
  kube::ApiResult<nlohmann::json> patchNodeStatus(const std::string& name, const nlohmann::json& patch) override;
  kube::ApiResult<nlohmann::json> createEvent(const std::string& ns, const nlohmann::json& event) override;
  // A merge patch of the TopologyPolicy's status subresource (not through ReconcileApi:
  // only the controller writes it).
  kube::ApiResult<nlohmann::json> patchPolicyStatus(const std::string& name, const nlohmann::json& patch);
  kube::ApiResult<std::string> readLog(const std::string& ns, const std::string& pod, const std::string& container,
                                       bool previous) override;

 private:
  const kube::Client& client_;
};

class Controller {
 public:
  Controller(const kube::Client& client, const OperatorConfig& config, metrics::Registry& metrics,
             std::function<bool()> mayWrite, std::string identity);
  ~Controller();
  Controller(const Controller&) = delete;
  Controller& operator=(const Controller&) = delete;

  // Starts the watches and the workers. A standby watches too, so that it
  // takes over with warm caches.
  void start();
  void stop();
  bool synced() const;
  // Every report and every Node, e.g. on becoming the leader.
  void enqueueAll();
  // On losing the lease: the verdict gauges are the leader's to show.
  void forgetVerdicts() { reconciler_.forgetVerdicts(); }

 private:
  void work();
  // The shaped pods' worker: explains them (PodReconciler) once the pod and Node caches synced.
  void workPods();
  // The facts of every node with the node-exclusive pods bound to it, for the pods that
  // wait: gathered at most once a second, as each waiting pod asks for them (every
  // pendingGrace, then every 30 s).
  std::shared_ptr<const std::vector<NodeFacts>> nodeFactsNow();
  // Blocks until every watch has synced and the policies are read: judging a
  // half-loaded world would flag reports whose Node or policy is not loaded yet.
  bool waitForCaches();
  // Reads the policies again; false when their specs did not change (a status write).
  bool reloadPolicies();
  std::vector<Policy> policies() const;
  // Every TopologyPolicy's status (judging/policy_status.h), written where it changed;
  // the leader's, soon after a policy, report or Node changed, and every kPolicyStatusPeriod.
  void writePolicyStatuses();

  const OperatorConfig config_;
  KubeReconcileApi api_;
  SystemClock clock_;
  Reconciler reconciler_;

  kube::Informer reports_, nodes_, policyInformer_;
  // What the policies' status and the pods' explanations read of each node, read again
  // from reports_ and nodes_ only where they changed.
  NodeTable nodeTable_;
  WorkQueue queue_;
  std::vector<std::thread> workers_;
  // The pods the webhook shaped (label podshaper.io/shaped=true), nothing else.
  PodReconciler podReconciler_;
  kube::Informer pods_;
  WorkQueue podQueue_;
  std::thread podWorker_;
  std::mutex nodeFactsMu_;
  std::shared_ptr<const std::vector<NodeFacts>> nodeFacts_;
  std::chrono::steady_clock::time_point nodeFactsAt_;
  std::thread resync_;
  std::thread policyStatusWorker_;
  std::atomic<bool> policyStatusDirty_{true};
  const std::function<bool()> mayWrite_;
  std::atomic<bool> stopping_{false};
  std::mutex resyncMu_;
  std::condition_variable resyncCv_;
  std::atomic<bool> cachesReady_{false};

  mutable std::mutex mu_;  // guards policies_ and policySpecs_
  std::vector<Policy> policies_;
  std::string policySpecs_;  // policySpecsKey of the policies read
  std::set<std::string> policiesWithoutStatus_;  // the policy status worker's only: told once

  metrics::Counter &reconcilesOk_, &reconcilesError_, &reconcilesSkipped_, &writesPolicyStatus_;
  metrics::Gauge &queueDepth_, &policiesGauge_, &policyErrors_;
  metrics::Histogram& duration_;
};

}  // namespace podshaper::op
