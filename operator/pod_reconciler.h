#pragma once

// One reconcile of a shaped pod (label podshaper.io/shaped): executes what judging/pod_plan.h
// decides of it (the logs and the ShmUsage to read, the Events to tell on the pod and on its controller, each
// once) and keeps what was told (docs/operator.md "Shaped pods explain themselves"). Like
// the report Reconciler, it writes only while `mayWrite()` (the leader) holds and never
// touches the queue: it says when to look again.

#include <atomic>
#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "judging/pod_plan.h"
#include "metrics/metrics.h"
#include "operator/reconciler.h"

namespace podshaper::op {

struct PodReconcilerOptions {
  std::string identity;                      // the Events' reportingInstance
  std::chrono::seconds pendingGrace{30};     // unscheduled this long before NotPlaceable
};

class PodReconciler {
 public:
  PodReconciler(ReconcileApi& api, const Clock& clock, metrics::Registry& metrics, std::function<bool()> mayWrite,
                PodReconcilerOptions options);
  PodReconciler(const PodReconciler&) = delete;
  PodReconciler& operator=(const PodReconciler&) = delete;

  // `pod` as the cache holds it (unset: gone). `nodes` is asked only for a pod that waits.
  Reconciler::Result reconcile(const std::string& key, const std::optional<nlohmann::json>& pod,
                               const std::function<std::shared_ptr<const std::vector<NodeFacts>>()>& nodes);

 private:
  bool tell(const PodTell& t);
  // How each log asked for was answered (LogToRead::key → LogRead).
  std::map<std::string, LogRead> readLogs(const nlohmann::json& pod, const std::vector<LogToRead>& asks);
  // The pod's ShmUsage; unset when there is none or it could not be read.
  std::optional<nlohmann::json> readShmUsage(const nlohmann::json& pod);
  metrics::Counter& podEvents(std::string_view reason, std::string_view cause);

  ReconcileApi& api_;
  const Clock& clock_;
  const std::function<bool()> mayWrite_;
  const PodReconcilerOptions options_;

  std::mutex mu_;  // guards memories_
  PodMemories memories_;
  std::atomic<unsigned> eventSequence_ = 0;
  std::atomic<bool> shmUsageFailureLogged_ = false;  // the first failure to read one is logged at info

  metrics::Registry& metrics_;
  metrics::Counter& writesEvent_;
};

}  // namespace podshaper::op
