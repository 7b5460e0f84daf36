#include "operator/controller.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <chrono>

#include "api/names.h"
#include "api/shm_volume.h"
#include "base/json_util.h"
#include "cli/logging.h"
#include "judging/policy_status.h"
#include "kube/protocol.h"

namespace podshaper::op {
namespace {

using nlohmann::json;

constexpr auto kResyncPeriod = std::chrono::minutes(10);
// How often the TopologyPolicies' status (the nodes each selects, validates, fails) is
// brought up to date; soon after a policy, a report or a Node changes.
constexpr auto kPolicyStatusPeriod = std::chrono::seconds(15);
constexpr auto kPolicyStatusGap = std::chrono::seconds(2);

// What the caches keep (informer transforms). At 5,000 nodes the full objects
// took ~680 MiB: every report's spec as a tree of small JSON values, and
// managedFields mirroring it; Nodes with their images and conditions.
void compactReport(json& report) {
  if (!report.is_object()) return;
  if (report.contains("metadata") && report["metadata"].is_object()) report["metadata"].erase("managedFields");
  // The spec is read once per judgement: kept as its text, parsed then (reportSpecOf).
  if (report.contains("spec") && !report["spec"].is_string()) report["spec"] = report["spec"].dump();
}

// A shaped pod, as judging/pending.h and judging/shm_exhausted.h read it.
void compactPod(json& pod) {
  if (!pod.is_object()) return;
  json kept = {{"metadata", json::object()}, {"spec", json::object()}, {"status", json::object()}};
  const json& m = member(pod, "metadata");
  for (const char* k : {"name", "namespace", "uid", "creationTimestamp", "deletionTimestamp", "labels",
                        "ownerReferences"}) {
    if (m.contains(k)) kept["metadata"][k] = m[k];
  }
  for (std::string_view k : {names::kShmSize, names::kShmFormula}) {
    if (auto v = annotation(pod, k)) kept["metadata"]["annotations"][std::string(k)] = *v;
  }
  const json& spec = member(pod, "spec");
  for (const char* k : {"nodeName", "nodeSelector", "tolerations", "schedulingGates"}) {
    if (spec.contains(k)) kept["spec"][k] = spec[k];
  }
  if (const json& na = member(member(spec, "affinity"), "nodeAffinity"); !na.is_null()) {
    kept["spec"]["affinity"]["nodeAffinity"] = na;
  }
  // Each container's /dev/shm mount and its volume: a ShmExhausted Event names the
  // /dev/shm the container had (podshaper's, or one of the user's with its size).
  for (const char* list : {"containers", "initContainers"}) {
    const json& containers = member(spec, list);
    if (!containers.is_array()) continue;
    for (const json& c : containers) {
      auto mount = shmMountOf(c);
      if (!mount) continue;
      json shmMount = json::object();
      shmMount["name"] = *mount;
      shmMount["mountPath"] = std::string(names::kShmMountPath);
      json keptContainer = json::object();
      keptContainer["name"] = member(c, "name");
      keptContainer["volumeMounts"] = json::array();
      keptContainer["volumeMounts"].push_back(std::move(shmMount));
      kept["spec"][list].push_back(std::move(keptContainer));
      const json& volumes = member(spec, "volumes");
      const ShmVolumeInfo volume = shmVolumeInfo(pod, *mount);
      if (volume.kind == ShmVolumeInfo::Kind::kMissing) continue;
      json& keptVolumes = kept["spec"]["volumes"];
      if (!keptVolumes.is_array() || std::none_of(keptVolumes.begin(), keptVolumes.end(),
                                                  [&](const json& v) { return hasText(member(v, "name"), *mount); })) {
        keptVolumes.push_back(volumes[volume.index]);
      }
    }
  }
  const json& status = member(pod, "status");
  if (status.contains("phase")) kept["status"]["phase"] = status["phase"];
  for (const json& c : member(status, "conditions")) {
    if (stringMember(c, "type") == "PodScheduled") kept["status"]["conditions"].push_back(c);
  }
  for (const char* list : {"initContainerStatuses", "containerStatuses"}) {
    for (const json& cs : member(status, list)) {
      json c = {{"name", member(cs, "name")}, {"restartCount", member(cs, "restartCount")}};
      for (const char* state : {"state", "lastState"}) {
        if (const json& t = member(member(cs, state), "terminated"); !t.is_null()) c[state]["terminated"] = t;
      }
      kept["status"][list].push_back(std::move(c));
    }
  }
  pod = std::move(kept);
}

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

void compactNode(json& node) {
  if (!node.is_object()) return;
  json kept = {{"metadata", json::object()}};
  const json& m = member(node, "metadata");
  for (const char* k : {"name", "uid", "resourceVersion", "labels"}) {
    if (m.contains(k)) kept["metadata"][k] = m[k];
  }
  if (const json& taints = member(member(node, "spec"), "taints"); !taints.is_null()) kept["spec"]["taints"] = taints;
  if (member(member(node, "spec"), "unschedulable") == true) kept["spec"]["unschedulable"] = true;
  for (const json& c : member(member(node, "status"), "conditions")) {  // podshaper's own, not the kubelet's
    if (stringMember(c, "type") == names::kNodeCondition) kept["status"]["conditions"] = json::array({c});
  }
  if (const json& alloc = member(member(node, "status"), "allocatable"); !alloc.is_null()) {
    kept["status"]["allocatable"] = alloc;
  }
  node = std::move(kept);
}

kube::ApiResult<json> KubeReconcileApi::patchReportStatus(const std::string& name, const json& body) {
  return client_.patchStatus(kube::resourcePath(names::kGroupVersion, names::kReportResource, "", name), body,
                             kube::PatchType::Merge);
}

kube::ApiResult<json> KubeReconcileApi::patchNode(const std::string& name, const json& patch) {
  return client_.patch(kube::resourcePath("v1", "nodes", "", name), patch, kube::PatchType::Merge);
}

kube::ApiResult<json> KubeReconcileApi::patchNodeStatus(const std::string& name, const json& patch) {
  return client_.patchStatus(kube::resourcePath("v1", "nodes", "", name), patch, kube::PatchType::StrategicMerge);
}

kube::ApiResult<json> KubeReconcileApi::createEvent(const std::string& ns, const json& event) {
  return client_.create(kube::resourcePath("v1", "events", ns), event);
}

kube::ApiResult<json> KubeReconcileApi::patchPolicyStatus(const std::string& name, const json& patch) {
  return client_.patchStatus(kube::resourcePath(names::kGroupVersion, names::kPolicyResource, "", name), patch,
                             kube::PatchType::Merge);
}

kube::ApiResult<std::string> KubeReconcileApi::readLog(const std::string& ns, const std::string& pod,
                                                       const std::string& container, bool previous) {
  // Enough lines for every worker's traceback after the one that matters, and a bound on
  // what one read costs (limitBytes counts from the first of those lines: few enough lines
  // that it seldom cuts the end, where the cause is).
  return client_.getText(kube::withQuery(kube::resourcePath("v1", "pods", ns, pod) + "/log",
                                         {{"container", container},
                                          {"previous", previous ? "true" : ""},
                                          {"tailLines", "500"},
                                          {"limitBytes", std::to_string(1 << 20)}}));
}

Controller::Controller(const kube::Client& client, const OperatorConfig& config, metrics::Registry& metrics,
                       std::function<bool()> mayWrite, std::string identity)
    : config_(config),
      api_(client),
      reconciler_(api_, clock_, metrics, mayWrite, {.identity = identity, .eventNamespace = config.eventNamespace}),
      reports_(client, kube::resourcePath(names::kGroupVersion, names::kReportResource), packedWith(compactReport)),
      nodes_(client, kube::resourcePath("v1", "nodes"), packedWith(compactNode)),
      policyInformer_(client, kube::resourcePath(names::kGroupVersion, names::kPolicyResource)),
      nodeTable_([this](const std::string& name) { return nodes_.get(name); },
                 [this](const std::string& name) { return reports_.get(name); }),
      podReconciler_(api_, clock_, metrics, mayWrite,
                     {.identity = std::move(identity), .pendingGrace = config.pendingGrace}),
      pods_(client, kube::resourcePath("v1", "pods"),
            withTransform(compactPod, std::string(names::kShapedLabel) + "=true")),
      mayWrite_(std::move(mayWrite)),
      reconcilesOk_(metrics.counter("podshaper_operator_reconciles_total", "Reconciles of a report or Node, by result.",
                                    {{"result", "ok"}})),
      reconcilesError_(metrics.counter("podshaper_operator_reconciles_total", "", {{"result", "error"}})),
      reconcilesSkipped_(metrics.counter("podshaper_operator_reconciles_total", "", {{"result", "not_leader"}})),
      writesPolicyStatus_(metrics.counter("podshaper_operator_writes_total", "", {{"kind", "policy_status"}})),
      queueDepth_(metrics.gauge("podshaper_operator_queue_depth", "Keys waiting to be reconciled.")),
      policiesGauge_(metrics.gauge("podshaper_operator_policies", "TopologyPolicies in effect.")),
      policyErrors_(metrics.gauge("podshaper_operator_policy_errors",
                                  "TopologyPolicies that could not be read (left out; see the log).")),
      duration_(metrics.histogram("podshaper_operator_reconcile_duration_seconds",
                                  "Time to reconcile one key, API writes included.",
                                  {0.0001, 0.0005, 0.001, 0.005, 0.01, 0.05, 0.1, 0.5, 1, 5})) {
  // Reports and Nodes share names: either one changing queues that node.
  auto enqueue = [this](const std::vector<std::string>& keys) {
    for (const auto& k : keys) queue_.add(k);
    nodeTable_.changed(keys);
    policyStatusDirty_ = true;  // a verdict or a node's labels may have changed
    resyncCv_.notify_all();
  };
  reports_.onKeys(enqueue);
  nodes_.onKeys(enqueue);
  pods_.onKeys([this](const std::vector<std::string>& keys) {
    for (const auto& k : keys) podQueue_.add(k);
  });
  // The operator's own status writes come back through this watch: the nodes are judged
  // again only when a policy's spec changed (reloadPolicies says).
  policyInformer_.onChange([this] {
    if (reloadPolicies()) enqueueAll();
    policyStatusDirty_ = true;
    resyncCv_.notify_all();
  });
}

Controller::~Controller() { stop(); }

void Controller::start() {
  policyInformer_.start();
  reports_.start();
  nodes_.start();
  pods_.start();
  for (int i = 0; i < config_.workers; ++i) workers_.emplace_back([this] { work(); });
  podWorker_ = std::thread([this] { workPods(); });
  // A safety net under the watches: judge everything again now and then. In a
  // steady cluster this computes and writes nothing.
  resync_ = std::thread([this] {
    std::unique_lock lock(resyncMu_);
    while (!resyncCv_.wait_for(lock, kResyncPeriod, [this] { return stopping_.load(); })) enqueueAll();
  });
  policyStatusWorker_ = std::thread([this] {
    if (!waitForCaches()) return;
    std::unique_lock lock(resyncMu_);
    while (!stopping_.load()) {
      const auto ran = std::chrono::steady_clock::now();
      lock.unlock();
      policyStatusDirty_ = false;
      try {
        writePolicyStatuses();
      } catch (const std::exception& e) {
        spdlog::error("TopologyPolicy status: {}", e.what());
      }
      lock.lock();
      // Soon after a change (at most once per kPolicyStatusGap, however many reports
      // change), else every kPolicyStatusPeriod.
      // (In one-second slices: the flag is set without resyncMu_, so that the informers
      // never wait on it, and a notify may come just before this wait.)
      while (!stopping_.load() && !policyStatusDirty_.load() &&
             std::chrono::steady_clock::now() < ran + kPolicyStatusPeriod) {
        resyncCv_.wait_for(lock, std::chrono::seconds(1));
      }
      resyncCv_.wait_until(lock, ran + kPolicyStatusGap, [this] { return stopping_.load(); });
    }
  });
}

void Controller::stop() {
  {
    std::lock_guard lock(resyncMu_);
    if (stopping_.exchange(true)) return;
  }
  resyncCv_.notify_all();
  queue_.shutDown();
  podQueue_.shutDown();
  for (auto& t : workers_) t.join();
  if (podWorker_.joinable()) podWorker_.join();
  pods_.stop();
  if (resync_.joinable()) resync_.join();
  if (policyStatusWorker_.joinable()) policyStatusWorker_.join();
  reports_.stop();
  nodes_.stop();
  policyInformer_.stop();
}

bool Controller::synced() const { return reports_.hasSynced() && nodes_.hasSynced() && policyInformer_.hasSynced(); }

void Controller::enqueueAll() {
  for (const auto& key : reports_.keys()) queue_.add(key);
  for (const auto& key : nodes_.keys()) queue_.add(key);
  for (const auto& key : pods_.keys()) podQueue_.add(key);
}

std::shared_ptr<const std::vector<NodeFacts>> Controller::nodeFactsNow() {
  std::lock_guard lock(nodeFactsMu_);
  const auto now = std::chrono::steady_clock::now();
  if (nodeFacts_ && now - nodeFactsAt_ < std::chrono::seconds(1)) return nodeFacts_;
  nodeFactsAt_ = now;
  auto facts = std::make_shared<std::vector<NodeFacts>>(*nodeTable_.snapshot());
  addExclusivePods(*facts, pods_.snapshot());
  nodeFacts_ = std::move(facts);
  return nodeFacts_;
}

void Controller::workPods() {
  while (!pods_.hasSynced() || !nodes_.hasSynced()) {
    std::unique_lock lock(resyncMu_);
    if (resyncCv_.wait_for(lock, std::chrono::milliseconds(200), [this] { return stopping_.load(); })) return;
  }
  while (auto key = podQueue_.get()) {
    Reconciler::Result result{Reconciler::Outcome::Retry, std::nullopt};
    try {
      result = podReconciler_.reconcile(*key, pods_.get(*key), [this] { return nodeFactsNow(); });
    } catch (const std::exception& e) {
      spdlog::error("pod {}: {}", *key, e.what());
    }
    switch (result.outcome) {
      case Reconciler::Outcome::Done:
        podQueue_.forget(*key);
        if (result.requeueAfter) podQueue_.addAfter(*key, *result.requeueAfter);
        break;
      case Reconciler::Outcome::NotLeader:
        podQueue_.forget(*key);
        break;
      case Reconciler::Outcome::Retry:
        podQueue_.retry(*key);
        break;
    }
    podQueue_.done(*key);
  }
}

bool Controller::waitForCaches() {
  if (cachesReady_.load()) return true;
  std::unique_lock lock(resyncMu_);
  while (!synced()) {
    if (resyncCv_.wait_for(lock, std::chrono::milliseconds(100), [this] { return stopping_.load(); })) return false;
  }
  lock.unlock();
  if (!cachesReady_.exchange(true)) {
    reloadPolicies();  // the policy informer's own callback may not have run yet
    nodeTable_.changed(nodes_.keys());
    spdlog::info("caches synced: {} reports, {} Nodes; judging", reports_.keys().size(), nodes_.keys().size());
    enqueueAll();
  }
  return true;
}

bool Controller::reloadPolicies() {
  std::vector<Policy> parsed;
  int errors = 0;
  const auto objects = policyInformer_.snapshot();
  const std::string specs = policySpecsKey(objects);
  {
    std::lock_guard lock(mu_);
    if (specs == policySpecs_) return false;
  }
  for (const auto& object : objects) {
    auto policy = policyFromJson(object);
    if (!policy) {
      ++errors;
      spdlog::warn("left out {}", policy.error().message);
      continue;
    }
    parsed.push_back(std::move(*policy));
  }
  policiesGauge_.set(static_cast<double>(parsed.size()));
  policyErrors_.set(errors);
  std::lock_guard lock(mu_);
  policies_ = std::move(parsed);
  policySpecs_ = specs;
  return true;
}

void Controller::writePolicyStatuses() {
  if (!mayWrite_() || policyInformer_.size() == 0) return;  // no policy: no node to read
  const auto nodes = nodeTable_.snapshot();
  const long long now = clock_.wallMicros() / 1000000;
  for (const json& policy : policyInformer_.snapshot()) {
    const std::string name = stringMember(member(policy, "metadata"), "name");
    const json& current = member(policy, "status");
    const json next = policyStatus(policy, *nodes, current, now);
    const json patch = policyStatusPatch(current, next);
    if (patch.is_null()) continue;
    if (auto written = api_.patchPolicyStatus(name, patch); !written) {
      // 404 for a policy the cache holds: a CRD of an earlier version, without the status
      // subresource (Helm does not upgrade CRDs). Said once per policy.
      if (!written.error().isNotFound() || policiesWithoutStatus_.insert(name).second) {
        spdlog::warn("TopologyPolicy {}: status not written: {}{}", name, written.error().message,
                     written.error().isNotFound() ? " (is the TopologyPolicy CRD this version's? kubectl apply -k crds/)"
                                                  : "");
      }
      continue;
    }
    writesPolicyStatus_.inc();
    const json& accepted = member(next, "conditions")[0];
    if (stringMember(accepted, "status") != "True") {
      spdlog::warn("TopologyPolicy {}: not accepted: {}", name, stringMember(accepted, "message"));
    } else {
      spdlog::info("TopologyPolicy {}: selects {} nodes: {} validated, {} failing", name,
                   member(next, "selectedNodes").dump(), member(next, "validatedNodes").dump(),
                   member(next, "failingNodes").dump());
    }
  }
}

std::vector<Policy> Controller::policies() const {
  std::lock_guard lock(mu_);
  return policies_;
}

void Controller::work() {
  if (!waitForCaches()) return;
  while (auto key = queue_.get()) {
    queueDepth_.set(static_cast<double>(queue_.depth()));
    const auto start = std::chrono::steady_clock::now();
    Reconciler::Result result{Reconciler::Outcome::Retry, std::nullopt};
    cli::LogObject about("node/" + *key);
    try {
      result = reconciler_.reconcile(*key, reports_.get(*key), nodes_.get(*key), policies());
    } catch (const std::exception& e) {
      spdlog::error("reconcile {}: {}", *key, e.what());
    }
    duration_.observe(std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
    switch (result.outcome) {
      case Reconciler::Outcome::Done:
        reconcilesOk_.inc();
        queue_.forget(*key);
        if (result.requeueAfter) queue_.addAfter(*key, *result.requeueAfter);
        break;
      case Reconciler::Outcome::NotLeader:
        reconcilesSkipped_.inc();  // the new leader judges everything when it starts
        queue_.forget(*key);
        break;
      case Reconciler::Outcome::Retry:
        reconcilesError_.inc();
        queue_.retry(*key);
        break;
    }
    queue_.done(*key);
    queueDepth_.set(static_cast<double>(queue_.depth()));
  }
}

}  // namespace podshaper::op
