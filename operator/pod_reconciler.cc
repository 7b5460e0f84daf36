#include "operator/pod_reconciler.h"

#include <spdlog/spdlog.h>

#include "base/json_util.h"

namespace podshaper::op {

using nlohmann::json;

namespace {
// Told-once memories are per pod and forgotten with it; controllers' outlive their pods,
// so that set is bounded by dropping it whole (a controller may then be told again).
constexpr std::size_t kMaxOwnersRemembered = 100000;
}  // namespace

PodReconciler::PodReconciler(ReconcileApi& api, const Clock& clock, metrics::Registry& metrics,
                             std::function<bool()> mayWrite, PodReconcilerOptions options)
    : api_(api),
      clock_(clock),
      mayWrite_(std::move(mayWrite)),
      options_(std::move(options)),
      metrics_(metrics),
      writesEvent_(metrics.counter("podshaper_operator_writes_total", "", {{"kind", "event"}})) {}

bool PodReconciler::tell(const ObjectRef& about, const std::string& ns, const EventSpec& event) {
  unsigned sequence;
  {
    std::lock_guard lock(mu_);
    sequence = eventSequence_++;
  }
  auto created = api_.createEvent(ns, eventObject(about, event, ns, options_.identity, clock_.wallMicros(), sequence));
  if (!created) {
    spdlog::warn("event {} {} on {} {}/{}: not recorded: {}", event.type, event.reason, about.kind, ns, about.name,
                 created.error().message);
    return false;
  }
  writesEvent_.inc();
  return true;
}

void PodReconciler::forget(const std::string& key) {
  std::lock_guard lock(mu_);
  auto it = uidOf_.find(key);
  if (it == uidOf_.end()) return;
  const std::string uid = it->second;
  uidOf_.erase(it);
  toldPending_.erase(uid);
  toldFailures_.erase(toldFailures_.lower_bound(uid + "/"), toldFailures_.lower_bound(uid + "0"));
}

Reconciler::Result PodReconciler::reconcile(const std::string& key, const std::optional<json>& pod,
                                            const std::function<std::shared_ptr<const std::vector<NodeFacts>>()>& nodes) {
  using Outcome = Reconciler::Outcome;
  if (!pod) {
    forget(key);
    return {Outcome::Done, std::nullopt};
  }
  if (!mayWrite_()) return {Outcome::NotLeader, std::nullopt};
  const json& meta = member(*pod, "metadata");
  const std::string ns = stringMember(meta, "namespace");
  const std::string uid = stringMember(meta, "uid");
  const ObjectRef self{"v1", "Pod", stringMember(meta, "name"), uid, ns};
  {
    std::lock_guard lock(mu_);
    uidOf_[key] = uid;
  }
  bool failed = false;

  for (const ShmFailure& f : judgeTerminations(*pod)) {
    bool told;
    {
      std::lock_guard lock(mu_);
      told = toldFailures_.contains(f.key);
    }
    if (!told) {
      if (!tell(self, ns, f.event)) {
        failed = true;
        continue;
      }
      metrics_.counter("podshaper_operator_pod_events_total",
                       "Events that explain a shaped pod, by reason (NotPlaceable, ShmExhausted) and cause.",
                       {{"reason", reasons::kShmExhausted}, {"cause", toString(f.cause)}})
          .inc();
      spdlog::info("pod {}: {} ({}), container {}", key, reasons::kShmExhausted, toString(f.cause), f.container);
      std::lock_guard lock(mu_);
      toldFailures_.insert(f.key);
    }
    // The controller once, whichever of its pods' failures comes first; a failed write is
    // tried again on the next look, even when the pod was told.
    if (auto owner = controllerOf(*pod)) {
      {
        std::lock_guard lock(mu_);
        if (toldOwners_.contains(owner->uid)) continue;
      }
      if (!tell(*owner, ns, ownerEvent(*pod, f))) {
        failed = true;
        continue;
      }
      std::lock_guard lock(mu_);
      if (toldOwners_.size() >= kMaxOwnersRemembered) toldOwners_.clear();
      toldOwners_.insert(owner->uid);
    }
  }

  std::optional<std::chrono::seconds> again;
  static const std::vector<NodeFacts> kNone;
  const auto facts = stringMember(member(*pod, "spec"), "nodeName").empty() ? nodes() : nullptr;
  const PendingJudgement pending =
      judgePending(*pod, facts ? *facts : kNone, clock_.wallMicros() / 1000000, options_.pendingGrace.count());
  if (pending.lookAgainAfter) again = std::chrono::seconds(*pending.lookAgainAfter);
  if (pending.event) {
    bool told;
    {
      std::lock_guard lock(mu_);
      auto it = toldPending_.find(uid);
      told = it != toldPending_.end() && it->second == pending.answer;
    }
    if (!told) {
      if (tell(self, ns, *pending.event)) {
        metrics_.counter("podshaper_operator_pod_events_total", "",
                         {{"reason", reasons::kNotPlaceable}, {"cause", pending.cause}})
            .inc();
        spdlog::info("pod {}: {} ({})", key, reasons::kNotPlaceable, pending.cause);
        std::lock_guard lock(mu_);
        toldPending_[uid] = pending.answer;
      } else {
        failed = true;
      }
    }
  } else if (!pending.pending) {
    std::lock_guard lock(mu_);
    toldPending_.erase(uid);
  }
  if (failed) return {Outcome::Retry, std::nullopt};
  return {Outcome::Done, again};
}

}  // namespace podshaper::op
