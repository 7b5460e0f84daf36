#include "operator/controller.h"

#include <spdlog/spdlog.h>

#include <chrono>

#include "api/names.h"
#include "kube/protocol.h"

namespace podshaper::op {
namespace {

using nlohmann::json;

// A safety net under the watches: everything judged again now and then. In a steady
// cluster this computes and writes nothing.
constexpr auto kResyncPeriod = std::chrono::minutes(10);

kube::InformerOptions withTransform(void (*transform)(json&), std::string labelSelector = {}) {
  kube::InformerOptions options;
  options.transform = transform;
  options.labelSelector = std::move(labelSelector);
  return options;
}

// Reports and Nodes, one per GPU node: kept packed (kube::packObject), each read whole
// when its key is reconciled.
kube::InformerOptions packedWith(void (*transform)(json&)) {
  kube::InformerOptions options = withTransform(transform);
  options.packed = true;
  return options;
}

}  // namespace

Controllers::Controllers(Caches caches, ReconcileApi& api, const Clock& clock, metrics::Registry& metrics,
                         std::function<bool()> mayWrite, const OperatorConfig& config, const std::string& identity,
                         WorkQueue::Now now)
    : caches_(caches),
      nodeTable_([this](const std::string& name) { return caches_.nodes.get(name); },
                 [this](const std::string& name) { return caches_.reports.get(name); }),
      report_(caches.reports, caches.nodes, caches.policies, caches.pods, api, clock, metrics, mayWrite,
              {.identity = identity, .eventNamespace = config.eventNamespace}, {.name = "report", .now = now}),
      pod_(caches.pods, nodeTable_, api, clock, metrics, mayWrite,
           {.identity = identity, .pendingGrace = config.pendingGrace}, {.name = "pod", .now = now}),
      policyStatus_(caches.policies, nodeTable_, api, clock, metrics, mayWrite,
                    {.name = "policy-status", .now = now}),
      shmProfile_(caches.pods, caches.shmUsages, caches.shmProfiles, api, clock, metrics, mayWrite,
                  config.shmProfiles, {.name = "shm-profile", .now = now}) {}

void Controllers::reportsOrNodesChanged(const std::vector<std::string>& keys) {
  report_.changed(keys);
  nodeTable_.changed(keys);
  policyStatus_.changed();  // a verdict or a node's labels may have changed
}

void Controllers::policiesChanged() {
  // The operator's own status writes come back through this watch: the nodes are judged
  // again only when a policy's spec changed.
  if (report_.reloadPolicies()) enqueueAll();
  policyStatus_.changed();
}

void Controllers::podsChanged(const std::vector<std::string>& keys) {
  report_.podsChanged(keys);  // a pod held for its memlock, or no longer, on a node
  pod_.changed(keys);
  shmProfile_.podsChanged(keys);
}

void Controllers::shmUsagesChanged(const std::vector<std::string>& keys) { shmProfile_.shmUsagesChanged(keys); }

void Controllers::shmProfilesChanged(const std::vector<std::string>& keys) { shmProfile_.profilesChanged(keys); }

void Controllers::cachesSynced() {
  report_.reloadPolicies();  // the policy watch's own callback may not have run yet
  nodeTable_.changed(caches_.nodes.keys());
  spdlog::info("caches synced: {} reports, {} Nodes; judging", caches_.reports.size(), caches_.nodes.size());
  enqueueAll();
}

void Controllers::enqueueAll() {
  report_.enqueueAll();
  pod_.enqueueAll();
  policyStatus_.enqueue();
  shmProfile_.enqueueAll();
}

void Controllers::start(int workers) {
  report_.runner().start(workers);
  pod_.runner().start(1);
  policyStatus_.runner().start(1);
  shmProfile_.runner().start(1);
}

void Controllers::stop() {
  report_.runner().stop();
  pod_.runner().stop();
  policyStatus_.runner().stop();
  shmProfile_.runner().stop();
}

int Controllers::drain() {
  int total = 0;
  for (int n = 1; n > 0; total += n) {
    n = report_.runner().drain() + pod_.runner().drain() + policyStatus_.runner().drain() +
        shmProfile_.runner().drain();
  }
  return total;
}

Controller::Controller(const kube::Client& client, const OperatorConfig& config, metrics::Registry& metrics,
                       std::function<bool()> mayWrite, std::string identity)
    : config_(config),
      api_(client),
      reports_(client, kube::resourcePath(names::kGroupVersion, names::kReportResource), packedWith(compactReport)),
      nodes_(client, kube::resourcePath("v1", "nodes"), packedWith(compactNode)),
      policies_(client, kube::resourcePath(names::kGroupVersion, names::kPolicyResource)),
      pods_(client, kube::resourcePath("v1", "pods"),
            withTransform(compactPod, std::string(names::kShapedLabel) + "=true")),
      shmUsages_(client, kube::resourcePath(names::kGroupVersion, names::kShmUsageResource),
                 withTransform(compactShmUsage)),
      shmProfiles_(client, kube::resourcePath(names::kGroupVersion, names::kShmProfileResource),
                   withTransform(compactShmProfile)),
      reportsCache_(reports_),
      nodesCache_(nodes_),
      policiesCache_(policies_),
      podsCache_(pods_),
      shmUsagesCache_(shmUsages_),
      shmProfilesCache_(shmProfiles_),
      controllers_({reportsCache_, nodesCache_, policiesCache_, podsCache_, shmUsagesCache_, shmProfilesCache_}, api_,
                   clock_, metrics, std::move(mayWrite), config, identity) {
  auto reportsOrNodes = [this](const std::vector<std::string>& keys) { controllers_.reportsOrNodesChanged(keys); };
  reports_.onKeys(reportsOrNodes);
  nodes_.onKeys(reportsOrNodes);
  pods_.onKeys([this](const std::vector<std::string>& keys) { controllers_.podsChanged(keys); });
  // Neither waited for: without podshaper-shm's CRD (or the right to list ShmUsages) the
  // rest still runs, and profiles count the deaths the pods show; the profiles' watch only
  // says which exist (those with no pod left still expire), its first list queues them all.
  shmUsages_.onKeys([this](const std::vector<std::string>& keys) { controllers_.shmUsagesChanged(keys); });
  shmProfiles_.onKeys([this](const std::vector<std::string>& keys) { controllers_.shmProfilesChanged(keys); });
  policies_.onChange([this] {
    controllers_.policiesChanged();
    watchSaid();
  });
  // onChange follows a list once hasSynced() holds.
  for (kube::Informer* informer : {&reports_, &nodes_, &pods_}) informer->onChange([this] { watchSaid(); });
}

Controller::~Controller() { stop(); }

void Controller::watchSaid() {
  { std::lock_guard lock(mu_); }  // the starter is waiting, or will see synced() before it waits
  cv_.notify_all();
}

void Controller::start() {
  policies_.start();
  reports_.start();
  nodes_.start();
  pods_.start();
  shmUsages_.start();
  shmProfiles_.start();
  starter_ = std::thread([this] {
    std::unique_lock lock(mu_);
    cv_.wait(lock, [this] { return stopping_ || (synced() && pods_.hasSynced()); });
    if (stopping_) return;
    lock.unlock();
    controllers_.cachesSynced();
    controllers_.start(config_.workers);
    lock.lock();
    while (!cv_.wait_for(lock, kResyncPeriod, [this] { return stopping_; })) {
      lock.unlock();
      controllers_.enqueueAll();
      lock.lock();
    }
  });
}

void Controller::stop() {
  {
    std::lock_guard lock(mu_);
    if (stopping_) return;
    stopping_ = true;
  }
  cv_.notify_all();
  if (starter_.joinable()) starter_.join();
  controllers_.stop();
  shmProfiles_.stop();
  shmUsages_.stop();
  pods_.stop();
  reports_.stop();
  nodes_.stop();
  policies_.stop();
}

bool Controller::synced() const { return reports_.hasSynced() && nodes_.hasSynced() && policies_.hasSynced(); }

}  // namespace podshaper::op
