#pragma once

// One reconcile of a shaped pod (label podshaper.io/shaped): what judging/pod_explain.h
// says of it, told as Events on the pod and on its controller, each once (docs/operator.md
// "Shaped pods explain themselves"). Like the report Reconciler, it writes only while
// `mayWrite()` (the leader) holds and never touches the queue: it says when to look again.

#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "judging/pod_explain.h"
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
  bool tell(const ObjectRef& about, const std::string& ns, const EventSpec& event);
  void forget(const std::string& key);
  void forgetUid(const std::string& uid);  // with mu_ held
  // What the logs of the runs that logsToRead names say (LogToRead::key → shmEvidence);
  // `failed` is set when a read failed for a reason that may pass (look again later).
  std::map<std::string, std::string> readLogs(const nlohmann::json& pod, const std::string& ns,
                                              const std::string& name, bool& failed);
  metrics::Counter& podEvents(std::string_view reason, std::string_view cause);

  struct ToldPending {
    std::string answer;  // the NotPlaceable told, without how long it had waited
    std::string cause;
    long long at = 0;    // when (seconds since the epoch)
  };

  ReconcileApi& api_;
  const Clock& clock_;
  const std::function<bool()> mayWrite_;
  const PodReconcilerOptions options_;

  std::mutex mu_;  // guards everything below
  std::map<std::string, std::string> uidOf_;          // pod key → uid
  std::map<std::string, ToldPending> toldPending_;    // pod uid → the NotPlaceable told
  std::set<std::string> toldFailures_;                // ShmFailure keys ("uid/container/…")
  std::set<std::string> toldOwners_;                  // controller uids told of a ShmExhausted pod
  // LogToRead::key → shmEvidence of what was read: each run's log is read once.
  std::map<std::string, std::string> logEvidence_;
  // pods/log answered 403 then (seconds since the epoch): judged from termination messages
  // only, until kLogsForbiddenFor has passed.
  std::optional<long long> logsForbiddenAt_;
  unsigned eventSequence_ = 0;

  metrics::Registry& metrics_;
  metrics::Counter& writesEvent_;
};

}  // namespace podshaper::op
