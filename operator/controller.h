#pragma once

// The operator's controllers and what feeds them. Controllers: the four controllers
// (operator/report_controller.h, pod_controller.h, policy_status_controller.h,
// shm_profile_controller.h) over caches and one ReconcileApi, and what each change queues
// where; a test drives it with caches in memory. Controller: the same over six informers
// (GPUTopologyReports, Nodes, TopologyPolicies, shaped pods, ShmUsages, ShmProfiles) and the
// Kubernetes API, its workers started once every watch but the last two has synced, and a
// periodic resync.

#include <condition_variable>
#include <functional>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "kube/client.h"
#include "kube/informer.h"
#include "metrics/metrics.h"
#include "operator/caches.h"
#include "operator/config.h"
#include "operator/kube_reconcile_api.h"
#include "operator/node_table.h"
#include "operator/pod_controller.h"
#include "operator/policy_status_controller.h"
#include "operator/reconciler.h"
#include "operator/report_controller.h"
#include "operator/shm_profile_controller.h"

namespace podshaper::op {

struct Caches {
  const Cache &reports, &nodes, &policies, &pods, &shmUsages, &shmProfiles;
};

class Controllers {
 public:
  // `now`: the queues' clock (unset: the steady clock).
  Controllers(Caches caches, ReconcileApi& api, const Clock& clock, metrics::Registry& metrics,
              std::function<bool()> mayWrite, const OperatorConfig& config, const std::string& identity,
              WorkQueue::Now now = {});

  // What the watches say changed.
  void reportsOrNodesChanged(const std::vector<std::string>& keys);
  void policiesChanged();
  void podsChanged(const std::vector<std::string>& keys);
  void shmUsagesChanged(const std::vector<std::string>& keys);
  void shmProfilesChanged(const std::vector<std::string>& keys);
  // Every cache has synced: judging a half-loaded world would flag reports whose Node or
  // policy is not loaded yet, so the first judgement waits for this.
  void cachesSynced();

  // Every report, Node, shaped pod, the policies' status and the shaped pods' profiles, e.g.
  // on becoming the leader.
  void enqueueAll();
  void start(int workers);
  void stop();
  // For tests, in place of the workers: every due key of every controller, on the calling
  // thread, until none is due (how many were reconciled).
  int drain();
  void forgetVerdicts() { report_.forgetVerdicts(); }

 private:
  Caches caches_;
  // What the policies' status and the pods' explanations read of each node, read again
  // from the caches only where they changed.
  NodeTable nodeTable_;
  ReportController report_;
  PodController pod_;
  PolicyStatusController policyStatus_;
  ShmProfileController shmProfile_;
};

class Controller {
 public:
  Controller(const kube::Client& client, const OperatorConfig& config, metrics::Registry& metrics,
             std::function<bool()> mayWrite, std::string identity);
  ~Controller();
  Controller(const Controller&) = delete;
  Controller& operator=(const Controller&) = delete;

  // Starts the watches, then the workers once they synced. A standby watches too, so that
  // it takes over with warm caches.
  void start();
  void stop();
  bool synced() const;
  void enqueueAll() { controllers_.enqueueAll(); }
  // On losing the lease: the verdict gauges are the leader's to show.
  void forgetVerdicts() { controllers_.forgetVerdicts(); }

 private:
  // Wakes the starter when a watch synced (or anything changed: it looks again).
  void watchSaid();

  const OperatorConfig config_;
  KubeReconcileApi api_;
  SystemClock clock_;
  kube::Informer reports_, nodes_, policies_, pods_, shmUsages_, shmProfiles_;
  InformerCache reportsCache_, nodesCache_, policiesCache_, podsCache_, shmUsagesCache_, shmProfilesCache_;
  Controllers controllers_;
  // Waits for the watches' sync, starts the workers, then queues everything every
  // kResyncPeriod.
  std::thread starter_;
  std::mutex mu_;  // guards stopping_
  std::condition_variable cv_;
  bool stopping_ = false;
};

}  // namespace podshaper::op
