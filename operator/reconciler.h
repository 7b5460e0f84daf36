#pragma once

// One reconcile of a node's name, as controller-runtime does it: the decision is
// judging/plan.h's, pure; this executes it through a narrow API and keeps what it
// learns between reconciles. It never touches the queue: it says when to look again.
// Every write carries the resourceVersion it was computed from, and is made only
// while `mayWrite()` (the leader) holds.

#include <chrono>
#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "api/policy.h"
#include "judging/plan.h"
#include "kube/api_result.h"
#include "metrics/metrics.h"

namespace podshaper::op {

// All the controllers' writes to the API server, and the reads that are not watched (a test
// fakes it).
class ReconcileApi {
 public:
  virtual ~ReconcileApi() = default;
  // A merge patch of the GPUTopologyReport's status subresource.
  virtual kube::ApiResult<nlohmann::json> patchReportStatus(const std::string& name, const nlohmann::json& body) = 0;
  // A merge patch of the Node.
  virtual kube::ApiResult<nlohmann::json> patchNode(const std::string& name, const nlohmann::json& patch) = 0;
  // A strategic merge patch of the Node's status subresource: its conditions, by type, and
  // its labels (the status subresource of a Node writes its metadata too).
  virtual kube::ApiResult<nlohmann::json> patchNodeStatus(const std::string& name, const nlohmann::json& patch) = 0;
  virtual kube::ApiResult<nlohmann::json> createEvent(const std::string& ns, const nlohmann::json& event) = 0;
  // A merge patch of the TopologyPolicy's status subresource.
  virtual kube::ApiResult<nlohmann::json> patchPolicyStatus(const std::string& name, const nlohmann::json& patch) = 0;
  // The last lines of a container's log (pods/log; `previous`: its run before the current one).
  virtual kube::ApiResult<std::string> readLog(const std::string& ns, const std::string& pod,
                                               const std::string& container, bool previous) = 0;
  // The pod's ShmUsage, podshaper-shm's (named after the pod); 404: none.
  virtual kube::ApiResult<nlohmann::json> getShmUsage(const std::string& ns, const std::string& name) = 0;
  // A workload's ShmProfile, the operator's alone (docs/operator.md "ShmProfiles"); 404: none.
  virtual kube::ApiResult<nlohmann::json> getShmProfile(const std::string& ns, const std::string& name) = 0;
  // POST; 409 when one of its name exists. Its status is not written: it is the status
  // subresource's.
  virtual kube::ApiResult<nlohmann::json> createShmProfile(const std::string& ns, const nlohmann::json& object) = 0;
  // PUT of its status subresource: `object` as read, with its status; 409 when it changed
  // since (its metadata.resourceVersion).
  virtual kube::ApiResult<nlohmann::json> putShmProfileStatus(const std::string& ns, const std::string& name,
                                                              const nlohmann::json& object) = 0;
  // DELETE, on the condition that it is still at `resourceVersion` (409 when not).
  virtual kube::ApiResult<nlohmann::json> deleteShmProfile(const std::string& ns, const std::string& name,
                                                           const std::string& resourceVersion) = 0;
};

// The reconcile's clocks, injected so that tests can move time.
class Clock {
 public:
  virtual ~Clock() = default;
  virtual long long wallMicros() const = 0;     // since the epoch: status times, staleness, Events
  virtual long long steadySeconds() const = 0;  // how long a Node has been gone
};

class SystemClock : public Clock {
 public:
  long long wallMicros() const override;
  long long steadySeconds() const override;
};

struct ReconcilerOptions {
  std::string identity;        // the Events' reportingInstance
  std::string eventNamespace;  // where Events about cluster-scoped objects go
};

class Reconciler {
 public:
  enum class Outcome { Done, NotLeader, Retry };
  struct Result {
    Outcome outcome = Outcome::Done;
    std::optional<std::chrono::seconds> requeueAfter;  // Done only: look again then
  };

  Reconciler(ReconcileApi& api, const Clock& clock, metrics::Registry& metrics, std::function<bool()> mayWrite,
             ReconcilerOptions options);
  Reconciler(const Reconciler&) = delete;
  Reconciler& operator=(const Reconciler&) = delete;

  // `report` and `node` as the caches hold them now (unset: none of that name); `held`: the
  // containers podshaper-shm holds back on that node for their memlock.
  Result reconcile(const std::string& key, const std::optional<nlohmann::json>& report,
                   const std::optional<nlohmann::json>& node, const std::vector<Policy>& policies,
                   const std::vector<MemlockHeld>& held = {});
  // On losing the lease: the verdict gauges are the leader's to show.
  void forgetVerdicts();

 private:
  Result execute(const std::string& key, const nlohmann::json& report, const nlohmann::json* node, const Plan& plan);
  // The Node's taint (with its labels), then its status: its GPUTopologyValidated
  // condition (with its labels, unless the taint took them), as planned.
  Outcome writeNode(const std::string& key, const nlohmann::json& node, const Plan& plan);
  Outcome labelNodeItself(const std::string& key, const nlohmann::json& metadata, const kube::ApiError& refused);
  Outcome writeFailed(const char* what, const std::string& key, const kube::ApiError& error);
  void recordEvents(const std::vector<PlannedEvent>& events);
  void setVerdict(const std::string& key, const char* verdict);
  // True when `object` is the version our write to it replaced (the cache lags).
  using Replaced = std::map<std::string, std::vector<std::string>>;
  bool cacheBehindWrite(Replaced& replaced, const std::string& key, const nlohmann::json& object);
  // One reconcile may write an object twice (a Node's labels, then its status): each
  // version it replaced is remembered.
  void rememberWrite(Replaced& replaced, const std::string& key, const std::string& resourceVersion);
  // How long the report at `key` has been seen without its Node (0 while it has one).
  long long nodeMissingFor(const std::string& key, bool missing);
  void forgetReport(const std::string& key, bool nodeExists);

  ReconcileApi& api_;
  const Clock& clock_;
  const std::function<bool()> mayWrite_;
  const ReconcilerOptions options_;

  std::mutex mu_;  // guards everything below: workers reconcile different keys at once
  std::map<std::string, std::string> verdicts_;  // report → validated / not_validated
  long long validatedCount_ = 0, notValidatedCount_ = 0;
  // The resourceVersions our last writes replaced, per key: while the cache
  // still holds one of them it has not seen our writes yet, and judging it
  // again would only earn a 409 or write the same again.
  Replaced replacedReport_, replacedNode_;
  // Reports whose Node is gone, since when (steady seconds).
  std::map<std::string, long long> nodeMissingSince_;
  unsigned eventSequence_ = 0;

  metrics::Counter &writesStatus_, &writesNode_, &writesEvent_, &conflicts_;
  metrics::Gauge &reportsValidated_, &reportsNotValidated_;
};

}  // namespace podshaper::op
