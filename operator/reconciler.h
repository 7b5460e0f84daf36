#pragma once

// The level-based reconciler: on any change of a GPUTopologyReport, its Node or
// a TopologyPolicy, it re-reads them from the informers' caches, judges the
// report (core/verdict.h) and writes only what differs: the report's status,
// Events for transitions, the Node's labels and taint. Every write carries the
// resourceVersion it was computed from, and is made only while `mayWrite()`
// (the leader) holds: a deposed leader's writes are refused by the API server
// or not sent.

#include <atomic>
#include <condition_variable>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "core/policy.h"
#include "core/verdict.h"
#include "kube/client.h"
#include "kube/informer.h"
#include "operator/config.h"
#include "operator/work_queue.h"
#include "server/metrics.h"

namespace podshaper::op {

class Reconciler {
 public:
  Reconciler(const kube::Client& client, const OperatorConfig& config, server::Metrics& metrics,
             std::function<bool()> mayWrite, std::string identity);
  ~Reconciler();
  Reconciler(const Reconciler&) = delete;
  Reconciler& operator=(const Reconciler&) = delete;

  // Starts the watches and the workers. A standby watches too, so that it
  // takes over with warm caches.
  void start();
  void stop();
  bool synced() const;
  // Every report and every Node, e.g. on becoming the leader.
  void enqueueAll();
  // On losing the lease: the verdict gauges are the leader's to show.
  void forgetVerdicts();

 private:
  enum class Outcome { Done, NotLeader, Retry };
  void work();
  // Blocks until every watch has synced and the policies are read: judging a
  // half-loaded world would flag reports whose Node or policy is not loaded yet.
  bool waitForCaches();
  Outcome writeFailed(const char* what, const std::string& key, const kube::ApiError& error);
  Outcome reconcile(const std::string& key);
  Outcome writeNode(const std::string& key, const nlohmann::json& node, const nlohmann::json& patch);
  void recordEvents(const nlohmann::json& report, const nlohmann::json* node, const nlohmann::json& currentStatus,
                    const Verdict& verdict);
  void reloadPolicies();
  std::vector<Policy> policies() const;
  void setVerdict(const std::string& key, const char* verdict);
  // True when `object` is the version our write to it replaced (the cache lags).
  bool cacheBehindWrite(std::map<std::string, std::string>& replaced, const std::string& key,
                        const nlohmann::json& object);
  void rememberWrite(std::map<std::string, std::string>& replaced, const std::string& key,
                     const nlohmann::json& object);

  const kube::Client& client_;
  const OperatorConfig config_;
  server::Metrics& metrics_;
  const std::function<bool()> mayWrite_;
  const std::string identity_;

  kube::Informer reports_, nodes_, policyInformer_;
  WorkQueue queue_;
  std::vector<std::thread> workers_;
  std::thread resync_;
  std::atomic<bool> stopping_{false};
  std::mutex resyncMu_;
  std::condition_variable resyncCv_;

  mutable std::mutex mu_;  // guards policies_, verdicts_
  std::vector<Policy> policies_;
  std::map<std::string, std::string> verdicts_;  // report → validated / not_validated
  long long validatedCount_ = 0, notValidatedCount_ = 0;
  // The resourceVersions our last writes replaced, per key: while the cache
  // still holds that version it has not seen our write yet, and judging it
  // again would only earn a 409.
  std::map<std::string, std::string> replacedReport_, replacedNode_;
  // Reports whose Node is gone, since when (steady seconds): the garbage
  // collector deletes an owned report soon after its Node; flag it only if not.
  std::map<std::string, long long> nodeMissingSince_;
  std::atomic<bool> cachesReady_{false};
  std::atomic<unsigned> eventSequence_{0};

  server::Counter &reconcilesOk_, &reconcilesError_, &reconcilesSkipped_;
  server::Counter &writesStatus_, &writesNode_, &writesEvent_, &conflicts_;
  server::Gauge &queueDepth_, &reportsValidated_, &reportsNotValidated_, &policiesGauge_, &policyErrors_;
  server::Histogram& duration_;
};

}  // namespace podshaper::op
