#pragma once

#include <chrono>
#include <condition_variable>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <thread>

#include "kube/client.h"
#include "kube/informer.h"
#include "metrics/metrics.h"
#include "shaping/admission_context.h"
#include "shaping/cluster_view.h"
#include "shaping/pod_claims.h"

namespace podshaper::webhook {

// What the Namespace and Node caches keep of each object (informer transforms): what
// admission reads (tests/unit/webhook/cluster_cache_test.cc holds them to it).
void keepNamespace(nlohmann::json& ns);
void keepNode(nlohmann::json& node);

// Namespaces (Pod Security labels) and Nodes (podshaper's labels, GPUs,
// memory) kept current by watches. Admission reads the latest snapshot and
// never waits on the API server. ResourceClaimTemplates and ResourceClaims
// (their device requests only) are watched too, for pods that ask GPUs
// through DRA; one the watch has not seen yet (created just before its pod)
// is read from the API server, with a short timeout. ShmProfiles (their runs
// and recommendation) are watched for the workloads sized from measured use.
class ClusterCache {
 public:
  // With `metrics`: podshaper_webhook_cached_objects{resource} counts what each watch holds.
  explicit ClusterCache(const kube::Client& client, metrics::Registry* metrics = nullptr);
  ~ClusterCache();
  ClusterCache(const ClusterCache&) = delete;
  ClusterCache& operator=(const ClusterCache&) = delete;

  void start();
  void stop();
  // True once the first view is built from both watches.
  bool synced() const { return view() != nullptr; }
  // Null until both watches have synced: decide from annotations and config meanwhile.
  std::shared_ptr<const ClusterView> view() const;
  // Reads the claims one admission's pod names: watched, else a GET (within a budget
  // of about 2 s for the admission). Valid while the cache lives: serve's cache
  // outlives its HTTPS server, whose handlers call it.
  ClaimLookup claims() const;
  // Reads the workloads' ShmProfiles from their watch alone: one not there yet is none
  // (the pod is sized by the formula), never a GET at admission.
  ShmProfileLookup shmProfiles() const;

 private:
  void rebuildLoop();
  Result<std::optional<nlohmann::json>> claimSpec(std::string_view ns, const ClaimRef& ref,
                                                  std::chrono::steady_clock::time_point deadline) const;

  kube::Client missClient_;  // GETs on a watch miss: short timeout, no resending
  kube::Informer namespaces_;
  kube::Informer nodes_;
  kube::Informer claimTemplates_;
  kube::Informer resourceClaims_;
  kube::Informer shmProfiles_;  // what api/shm_profile.h keepShmProfile keeps, packed
  mutable std::mutex mu_;
  std::condition_variable changed_;
  bool dirty_ = false;
  bool stopping_ = false;
  std::set<std::string> changedNodes_;  // what the Node watch changed since the last view
  // The Nodes placement reads, by name (the rebuild thread's only): read again from the
  // watch's store only where it changed, not 12,500 each time one does.
  std::map<std::string, Node> placedNodes_;
  StringPool labelStrings_;  // their labels' strings, shared between them (the rebuild thread's only)
  std::shared_ptr<const ClusterView> view_;
  std::thread rebuilder_;
};

}  // namespace podshaper::webhook
