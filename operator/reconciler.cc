#include "operator/reconciler.h"

#include <spdlog/spdlog.h>

#include <chrono>

#include "core/json_util.h"
#include "core/names.h"
#include "core/report_status.h"
#include "core/verdict.h"
#include "kube/protocol.h"
#include "operator/events.h"

namespace podshaper::op {
namespace {

using nlohmann::json;
using Clock = std::chrono::system_clock;

constexpr auto kResyncPeriod = std::chrono::minutes(10);
// How long a report may outlive its Node before it is flagged (the garbage
// collector normally deletes it within seconds).
constexpr long long kNodeGoneGraceSeconds = 60;

long long nowMicros() {
  return std::chrono::duration_cast<std::chrono::microseconds>(Clock::now().time_since_epoch()).count();
}

// What the caches keep (informer transforms). At 5,000 nodes the full objects
// took ~680 MiB: every report's spec as a tree of small JSON values, and
// managedFields mirroring it; Nodes with their images and conditions.
void compactReport(json& report) {
  if (!report.is_object()) return;
  if (report.contains("metadata") && report["metadata"].is_object()) report["metadata"].erase("managedFields");
  // The spec is read once per judgement: kept as its text, parsed then.
  if (report.contains("spec") && !report["spec"].is_string()) report["spec"] = report["spec"].dump();
}

void compactNode(json& node) {
  if (!node.is_object()) return;
  json kept = {{"metadata", json::object()}};
  const json& m = member(node, "metadata");
  for (const char* k : {"name", "uid", "resourceVersion", "labels"}) {
    if (m.contains(k)) kept["metadata"][k] = m[k];
  }
  if (const json& taints = member(member(node, "spec"), "taints"); !taints.is_null()) kept["spec"]["taints"] = taints;
  if (const json& alloc = member(member(node, "status"), "allocatable"); !alloc.is_null()) {
    kept["status"]["allocatable"] = alloc;
  }
  node = std::move(kept);
}

json specOf(const json& report) {
  const json& spec = member(report, "spec");
  if (!spec.is_string()) return spec;
  json parsed = json::parse(spec.get_ref<const std::string&>(), nullptr, /*allow_exceptions=*/false);
  return parsed.is_discarded() ? json(nullptr) : parsed;
}

kube::InformerOptions withTransform(void (*transform)(json&)) {
  kube::InformerOptions options;
  options.transform = transform;
  return options;
}

long long steadySeconds() {
  return std::chrono::duration_cast<std::chrono::seconds>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

bool ownedByNode(const json& report) {
  const json* refs = report.contains("metadata") && report["metadata"].is_object() &&
                             report["metadata"].contains("ownerReferences") &&
                             report["metadata"]["ownerReferences"].is_array()
                         ? &report["metadata"]["ownerReferences"]
                         : nullptr;
  if (refs == nullptr) return false;
  for (const auto& r : *refs) {
    if (r.is_object() && r.value("kind", json()) == "Node") return true;
  }
  return false;
}

std::string metaString(const json& object, const char* key) {
  if (!object.is_object() || !object.contains("metadata") || !object["metadata"].is_object()) return "";
  const json& m = object["metadata"];
  return m.contains(key) && m[key].is_string() ? m[key].get<std::string>() : "";
}

long long generationOf(const json& object) {
  if (!object.is_object() || !object.contains("metadata")) return 0;
  const json& m = object["metadata"];
  return m.is_object() && m.contains("generation") && m["generation"].is_number_integer()
             ? m["generation"].get<long long>()
             : 0;
}

}  // namespace

Reconciler::Reconciler(const kube::Client& client, const OperatorConfig& config, server::Metrics& metrics,
                       std::function<bool()> mayWrite, std::string identity)
    : client_(client),
      config_(config),
      metrics_(metrics),
      mayWrite_(std::move(mayWrite)),
      identity_(std::move(identity)),
      reports_(client, kube::resourcePath(names::kGroupVersion, names::kReportResource), withTransform(compactReport)),
      nodes_(client, kube::resourcePath("v1", "nodes"), withTransform(compactNode)),
      policyInformer_(client, kube::resourcePath(names::kGroupVersion, names::kPolicyResource)),
      reconcilesOk_(metrics.counter("podshaper_operator_reconciles_total", "Reconciles of a report or Node, by result.",
                                    {{"result", "ok"}})),
      reconcilesError_(metrics.counter("podshaper_operator_reconciles_total", "", {{"result", "error"}})),
      reconcilesSkipped_(metrics.counter("podshaper_operator_reconciles_total", "", {{"result", "not_leader"}})),
      writesStatus_(metrics.counter("podshaper_operator_writes_total",
                                    "API writes, by kind: report status, Node labels/taint, Events.",
                                    {{"kind", "status"}})),
      writesNode_(metrics.counter("podshaper_operator_writes_total", "", {{"kind", "node"}})),
      writesEvent_(metrics.counter("podshaper_operator_writes_total", "", {{"kind", "event"}})),
      conflicts_(metrics.counter("podshaper_operator_conflicts_total",
                                 "Writes refused because the object changed since it was read (retried).")),
      queueDepth_(metrics.gauge("podshaper_operator_queue_depth", "Keys waiting to be reconciled.")),
      reportsValidated_(metrics.gauge("podshaper_operator_reports", "GPUTopologyReports by verdict (leader only).",
                                      {{"verdict", "validated"}})),
      reportsNotValidated_(metrics.gauge("podshaper_operator_reports", "", {{"verdict", "not_validated"}})),
      policiesGauge_(metrics.gauge("podshaper_operator_policies", "TopologyPolicies in effect.")),
      policyErrors_(metrics.gauge("podshaper_operator_policy_errors",
                                  "TopologyPolicies that could not be read (left out; see the log).")),
      duration_(metrics.histogram("podshaper_operator_reconcile_duration_seconds",
                                  "Time to reconcile one key, API writes included.",
                                  {0.0001, 0.0005, 0.001, 0.005, 0.01, 0.05, 0.1, 0.5, 1, 5})) {
  // Reports and Nodes share names: either one changing queues that node.
  auto enqueue = [this](const std::vector<std::string>& keys) {
    for (const auto& k : keys) queue_.add(k);
  };
  reports_.onKeys(enqueue);
  nodes_.onKeys(enqueue);
  policyInformer_.onChange([this] {
    reloadPolicies();
    enqueueAll();
  });
}

Reconciler::~Reconciler() { stop(); }

void Reconciler::start() {
  policyInformer_.start();
  reports_.start();
  nodes_.start();
  for (int i = 0; i < config_.workers; ++i) workers_.emplace_back([this] { work(); });
  // A safety net under the watches: judge everything again now and then. In a
  // steady cluster this computes and writes nothing.
  resync_ = std::thread([this] {
    std::unique_lock lock(resyncMu_);
    while (!resyncCv_.wait_for(lock, kResyncPeriod, [this] { return stopping_.load(); })) enqueueAll();
  });
}

void Reconciler::stop() {
  {
    std::lock_guard lock(resyncMu_);
    if (stopping_.exchange(true)) return;
  }
  resyncCv_.notify_all();
  queue_.shutDown();
  for (auto& t : workers_) t.join();
  if (resync_.joinable()) resync_.join();
  reports_.stop();
  nodes_.stop();
  policyInformer_.stop();
}

bool Reconciler::synced() const { return reports_.hasSynced() && nodes_.hasSynced() && policyInformer_.hasSynced(); }

void Reconciler::enqueueAll() {
  for (const auto& key : reports_.keys()) queue_.add(key);
  for (const auto& key : nodes_.keys()) queue_.add(key);
}

void Reconciler::forgetVerdicts() {
  std::lock_guard lock(mu_);
  verdicts_.clear();
  validatedCount_ = notValidatedCount_ = 0;
  reportsValidated_.set(0);
  reportsNotValidated_.set(0);
}

bool Reconciler::waitForCaches() {
  if (cachesReady_.load()) return true;
  std::unique_lock lock(resyncMu_);
  while (!synced()) {
    if (resyncCv_.wait_for(lock, std::chrono::milliseconds(100), [this] { return stopping_.load(); })) return false;
  }
  lock.unlock();
  if (!cachesReady_.exchange(true)) {
    reloadPolicies();  // the policy informer's own callback may not have run yet
    spdlog::info("caches synced: {} reports, {} Nodes; judging", reports_.keys().size(), nodes_.keys().size());
    enqueueAll();
  }
  return true;
}

void Reconciler::reloadPolicies() {
  std::vector<Policy> parsed;
  int errors = 0;
  for (const auto& object : policyInformer_.snapshot()) {
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
}

std::vector<Policy> Reconciler::policies() const {
  std::lock_guard lock(mu_);
  return policies_;
}

void Reconciler::setVerdict(const std::string& key, const char* verdict) {
  std::lock_guard lock(mu_);
  // Running counts: a loop over every verdict per reconcile was 6% of the CPU at 5,000 nodes.
  auto it = verdicts_.find(key);
  if (it != verdicts_.end()) {
    (it->second == "validated" ? validatedCount_ : notValidatedCount_)--;
    if (verdict == nullptr) {
      verdicts_.erase(it);
    } else {
      it->second = verdict;
    }
  } else if (verdict != nullptr) {
    verdicts_.emplace(key, verdict);
  }
  if (verdict != nullptr) (std::string_view(verdict) == "validated" ? validatedCount_ : notValidatedCount_)++;
  reportsValidated_.set(static_cast<double>(validatedCount_));
  reportsNotValidated_.set(static_cast<double>(notValidatedCount_));
}

bool Reconciler::cacheBehindWrite(std::map<std::string, std::string>& replaced, const std::string& key,
                                  const json& object) {
  std::lock_guard lock(mu_);
  auto it = replaced.find(key);
  if (it == replaced.end()) return false;
  if (it->second == kube::resourceVersionOf(object)) return true;
  replaced.erase(it);  // the cache moved on
  return false;
}

void Reconciler::rememberWrite(std::map<std::string, std::string>& replaced, const std::string& key,
                               const json& object) {
  std::lock_guard lock(mu_);
  replaced[key] = kube::resourceVersionOf(object);
}

void Reconciler::work() {
  if (!waitForCaches()) return;
  while (auto key = queue_.get()) {
    queueDepth_.set(static_cast<double>(queue_.depth()));
    const auto start = std::chrono::steady_clock::now();
    Outcome outcome = Outcome::Retry;
    try {
      outcome = reconcile(*key);
    } catch (const std::exception& e) {
      spdlog::error("reconcile {}: {}", *key, e.what());
    }
    duration_.observe(std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
    switch (outcome) {
      case Outcome::Done:
        reconcilesOk_.inc();
        queue_.forget(*key);
        break;
      case Outcome::NotLeader:
        reconcilesSkipped_.inc();  // the new leader judges everything when it starts
        queue_.forget(*key);
        break;
      case Outcome::Retry:
        reconcilesError_.inc();
        queue_.retry(*key);
        break;
    }
    queue_.done(*key);
    queueDepth_.set(static_cast<double>(queue_.depth()));
  }
}

Reconciler::Outcome Reconciler::reconcile(const std::string& key) {
  if (!mayWrite_()) return Outcome::NotLeader;
  const auto report = reports_.get(key);
  const auto node = nodes_.get(key);
  // Our own last write has not reached the cache yet; its watch event queues the key again.
  if ((report && cacheBehindWrite(replacedReport_, key, *report)) ||
      (node && cacheBehindWrite(replacedNode_, key, *node))) {
    return Outcome::Done;
  }

  if (!report) {
    setVerdict(key, nullptr);
    {
      std::lock_guard lock(mu_);
      replacedReport_.erase(key);
      nodeMissingSince_.erase(key);
      if (!node) replacedNode_.erase(key);
    }
    // A Node whose report is gone keeps no verdict it can no longer back.
    if (node) {
      const json patch = nodePatch(*node, nullptr);
      if (!patch.is_null()) return writeNode(key, *node, patch);
    }
    return Outcome::Done;
  }

  if (!node && ownedByNode(*report)) {
    // Its Node was just deleted: the garbage collector removes the report next.
    long long waited;
    {
      std::lock_guard lock(mu_);
      replacedNode_.erase(key);
      waited = steadySeconds() - nodeMissingSince_.try_emplace(key, steadySeconds()).first->second;
    }
    if (waited < kNodeGoneGraceSeconds) {
      queue_.addAfter(key, std::chrono::seconds(kNodeGoneGraceSeconds - waited));
      return Outcome::Done;
    }
  } else {
    std::lock_guard lock(mu_);
    nodeMissingSince_.erase(key);
  }

  NodeFacts facts;
  if (node) facts = nodeFactsFromJson(*node);
  const long long nowSeconds = nowMicros() / 1000000;
  const json spec = specOf(*report);
  const Verdict verdict = judge(spec, node ? &facts : nullptr, policies(), nowSeconds);
  setVerdict(key, verdict.validated ? "validated" : "not_validated");

  const json current = report->contains("status") ? (*report)["status"] : json(nullptr);
  const json next = reportStatus(verdict, current, generationOf(*report), nowSeconds);
  if (statusChanged(current, next)) {
    if (!mayWrite_()) return Outcome::NotLeader;
    const json body = {{"metadata", {{"resourceVersion", kube::resourceVersionOf(*report)}}}, {"status", next}};
    auto written = client_.patchStatus(kube::resourcePath(names::kGroupVersion, names::kReportResource, "", key), body,
                                       kube::PatchType::Merge);
    if (!written) return writeFailed("report", key, written.error());
    writesStatus_.inc();
    rememberWrite(replacedReport_, key, *report);
    const Condition* validated = verdict.condition(conditions::kValidated);
    spdlog::info("report {}: Validated={} ({}) gpus={} interconnect={} p2p={} memlock={}", key, validated->status,
                 validated->reason, verdict.gpus, verdict.interconnect, verdict.p2p, verdict.memlock);
    // Events follow the status write that records the transition: one writer
    // wins that write, so a transition is told once, whichever replica saw it.
    recordEvents(*report, node ? &*node : nullptr, current, verdict);
  }

  if (node) {
    const json patch = nodePatch(*node, &verdict);
    if (!patch.is_null()) {
      if (auto outcome = writeNode(key, *node, patch); outcome != Outcome::Done) return outcome;
    }
  }
  if (verdict.staleAt) queue_.addAfter(key, std::chrono::seconds(*verdict.staleAt - nowSeconds));
  return Outcome::Done;
}

Reconciler::Outcome Reconciler::writeFailed(const char* what, const std::string& key, const kube::ApiError& error) {
  if (error.isNotFound()) return Outcome::Done;  // deleted meanwhile: its DELETED event follows
  if (error.isConflict()) {
    conflicts_.inc();
    spdlog::info("{} {}: changed since read; judging it again ({})", what, key, error.message);
  } else {
    spdlog::warn("{} {}: not written: {}", what, key, error.message);
  }
  return Outcome::Retry;
}

Reconciler::Outcome Reconciler::writeNode(const std::string& key, const json& node, const json& patch) {
  if (!mayWrite_()) return Outcome::NotLeader;
  auto written = client_.patch(kube::resourcePath("v1", "nodes", "", key), patch, kube::PatchType::Merge);
  if (!written) return writeFailed("node", key, written.error());
  writesNode_.inc();
  rememberWrite(replacedNode_, key, node);
  spdlog::info("node {}: {}", key, patch.dump());
  return Outcome::Done;
}

void Reconciler::recordEvents(const json& report, const json* node, const json& currentStatus,
                              const Verdict& verdict) {
  const auto events = transitionEvents(currentStatus, verdict);
  if (events.empty()) return;
  std::vector<ObjectRef> about = {{std::string(names::kGroupVersion), std::string(names::kReportKind),
                                   metaString(report, "name"), metaString(report, "uid")}};
  if (node != nullptr) about.push_back({"v1", "Node", metaString(*node, "name"), metaString(*node, "uid")});
  const std::string path = kube::resourcePath("v1", "events", config_.eventNamespace);
  for (const auto& e : events) {
    for (const auto& ref : about) {
      // The Node hears of problems; that a node is fine is the report's to say
      // (at 5,000 nodes a Normal per Node was a quarter of the writes of a cold start).
      if (ref.kind == "Node" && e.type != "Warning") continue;
      const json event = eventObject(ref, e, config_.eventNamespace, identity_, nowMicros(), eventSequence_++);
      auto created = client_.create(path, event);
      if (!created) {
        // Best effort, as in client-go's recorder: the status already says it.
        spdlog::warn("event {} {} on {} {}: not recorded: {}", e.type, e.reason, ref.kind, ref.name,
                     created.error().message);
        continue;
      }
      writesEvent_.inc();
    }
  }
}

}  // namespace podshaper::op
