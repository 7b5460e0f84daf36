#include "operator/policy_status_controller.h"

#include "base/json_util.h"
#include "cli/logging.h"
#include "judging/policy_status.h"
#include "operator/writes.h"

namespace podshaper::op {

namespace {
const cli::Logger& kLog = cli::logger("policy");
}  // namespace

using nlohmann::json;

PolicyStatusController::PolicyStatusController(const Cache& policies, NodeTable& nodeTable, ReconcileApi& api,
                                               const Clock& clock, metrics::Registry& metrics,
                                               std::function<bool()> mayWrite, RunnerOptions runner)
    : policies_(policies),
      nodeTable_(nodeTable),
      api_(api),
      clock_(clock),
      mayWrite_(std::move(mayWrite)),
      writes_(writesTotal(metrics, WriteKind::kPolicyStatus)),
      runner_(std::move(runner), metrics, [this](const std::string&) { return reconcile(); }) {}

void PolicyStatusController::changed() {
  const WorkQueue::Clock::time_point last{WorkQueue::Clock::duration(lastLook_.load())};
  runner_.addAfter(kKey, last + kPolicyStatusGap - runner_.now());
}

Reconciler::Result PolicyStatusController::reconcile() {
  if (!mayWrite_()) return {Reconciler::Outcome::NotLeader, std::nullopt};
  lastLook_ = runner_.now().time_since_epoch().count();
  const Reconciler::Result again{Reconciler::Outcome::Done, kPolicyStatusPeriod};
  if (policies_.size() == 0) return again;  // no policy: no node to read
  const auto nodes = nodeTable_.snapshot();
  const long long now = clock_.wallMicros() / 1000000;
  for (const json& policy : policies_.snapshot()) {
    const std::string name = stringMember(member(policy, "metadata"), "name");
    const json& current = member(policy, "status");
    const json next = policyStatus(policy, *nodes, current, now);
    const json patch = policyStatusPatch(current, next);
    if (patch.is_null()) continue;
    if (auto written = api_.patchPolicyStatus(name, patch); !written) {
      // 404 for a policy the cache holds: a CRD of an earlier version, without the status
      // subresource (Helm does not upgrade CRDs). Said once per policy.
      if (!written.error().isNotFound() || withoutStatus_.insert(name).second) {
        kLog.warn({{"policy", name}}, "status not written: {}{}", written.error().message,
                  written.error().isNotFound() ? " (is the TopologyPolicy CRD this version's? kubectl apply -k crds/)"
                                               : "");
      }
      continue;
    }
    writes_.inc();
    const json& accepted = member(next, "conditions")[0];
    if (stringMember(accepted, "status") != "True") {
      kLog.warn({{"policy", name}}, "not accepted: {}", stringMember(accepted, "message"));
    } else {
      kLog.info({{"policy", name}}, "selects {} nodes: {} validated, {} failing", member(next, "selectedNodes").dump(),
                member(next, "validatedNodes").dump(), member(next, "failingNodes").dump());
    }
  }
  return again;
}

}  // namespace podshaper::op
