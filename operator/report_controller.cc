#include "operator/report_controller.h"

#include "base/json_util.h"
#include "cli/logging.h"
#include "judging/policy_status.h"

namespace podshaper::op {

namespace {
const cli::Logger& kPolicy = cli::logger("policy");
}  // namespace

ReportController::ReportController(const Cache& reports, const Cache& nodes, const Cache& policies,
                                   const Cache& pods, ReconcileApi& api, const Clock& clock,
                                   metrics::Registry& metrics, std::function<bool()> mayWrite,
                                   ReconcilerOptions options, RunnerOptions runner)
    : reports_(reports),
      nodes_(nodes),
      policyCache_(policies),
      pods_(pods),
      reconciler_(api, clock, metrics, std::move(mayWrite), std::move(options)),
      policiesGauge_(metrics.gauge("podshaper_operator_policies", "TopologyPolicies in effect.")),
      policyErrors_(metrics.gauge("podshaper_operator_policy_errors",
                                  "TopologyPolicies that could not be read (left out; see the log).")),
      runner_(std::move(runner), metrics, [this](const std::string& key) { return reconcile(key); }) {}

void ReportController::changed(const std::vector<std::string>& keys) {
  for (const auto& k : keys) runner_.add(k);
}

void ReportController::podsChanged(const std::vector<std::string>& keys) {
  for (const auto& key : keys) {
    const std::optional<nlohmann::json> pod = pods_.get(key);
    std::vector<MemlockHeld> held = pod ? memlockHeld(*pod) : std::vector<MemlockHeld>{};
    std::string node = pod ? stringMember(member(*pod, "spec"), "nodeName") : std::string();
    if (node.empty()) held.clear();  // not bound: held nowhere
    std::vector<std::string> queue;
    {
      std::lock_guard lock(mu_);
      auto it = heldPods_.find(key);
      if (it == heldPods_.end() && held.empty()) continue;  // never held, as most pods
      if (it != heldPods_.end()) {
        if (it->second.node == node && it->second.held == held) continue;
        queue.push_back(it->second.node);
        auto onNode = heldByNode_.find(it->second.node);
        onNode->second.erase(key);
        if (onNode->second.empty()) heldByNode_.erase(onNode);
        heldPods_.erase(it);
      }
      if (!held.empty()) {
        if (queue.empty() || queue.front() != node) queue.push_back(node);
        const HeldPod& kept = heldPods_[key] = HeldPod{std::move(node), std::move(held)};
        heldByNode_[kept.node][key] = &kept;
      }
    }
    for (const auto& n : queue) runner_.add(n);
  }
}

std::vector<MemlockHeld> ReportController::heldOn(const std::string& node) const {
  std::vector<MemlockHeld> held;
  std::lock_guard lock(mu_);
  auto it = heldByNode_.find(node);
  if (it == heldByNode_.end()) return held;
  for (const auto& [key, pod] : it->second) held.insert(held.end(), pod->held.begin(), pod->held.end());
  return held;
}

void ReportController::enqueueAll() {
  for (const auto& key : reports_.keys()) runner_.add(key);
  for (const auto& key : nodes_.keys()) runner_.add(key);
}

Reconciler::Result ReportController::reconcile(const std::string& key) {
  cli::LogObject about("node/" + key);
  return reconciler_.reconcile(key, reports_.get(key), nodes_.get(key), policies(), heldOn(key));
}

bool ReportController::reloadPolicies() {
  std::vector<Policy> parsed;
  int errors = 0;
  const auto objects = policyCache_.snapshot();
  const std::string specs = policySpecsKey(objects);
  {
    std::lock_guard lock(mu_);
    if (specs == policySpecs_) return false;
  }
  for (const auto& object : objects) {
    auto policy = policyFromJson(object);
    if (!policy) {
      ++errors;
      kPolicy.warn("left out {}", policy.error().message);
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

std::vector<Policy> ReportController::policies() const {
  std::lock_guard lock(mu_);
  return policies_;
}

}  // namespace podshaper::op
