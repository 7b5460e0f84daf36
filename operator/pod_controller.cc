#include "operator/pod_controller.h"

namespace podshaper::op {

PodController::PodController(const Cache& pods, NodeTable& nodeTable, ReconcileApi& api, const Clock& clock,
                             metrics::Registry& metrics, std::function<bool()> mayWrite,
                             PodReconcilerOptions options, RunnerOptions runner)
    : pods_(pods),
      nodeTable_(nodeTable),
      reconciler_(api, clock, metrics, std::move(mayWrite), std::move(options)),
      runner_(std::move(runner), metrics, [this](const std::string& key) {
        return reconciler_.reconcile(key, pods_.get(key), [this] { return nodeFactsNow(); });
      }) {}

void PodController::changed(const std::vector<std::string>& keys) {
  for (const auto& k : keys) runner_.add(k);
}

void PodController::enqueueAll() {
  for (const auto& key : pods_.keys()) runner_.add(key);
}

std::shared_ptr<const std::vector<NodeFacts>> PodController::nodeFactsNow() {
  std::lock_guard lock(nodeFactsMu_);
  const auto now = runner_.now();
  if (nodeFacts_ && now - nodeFactsAt_ < std::chrono::seconds(1)) return nodeFacts_;
  nodeFactsAt_ = now;
  auto facts = std::make_shared<std::vector<NodeFacts>>(*nodeTable_.snapshot());
  addBoundPods(*facts, pods_.snapshot());
  nodeFacts_ = std::move(facts);
  return nodeFacts_;
}

}  // namespace podshaper::op
