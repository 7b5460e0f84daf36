#include "operator/pod_reconciler.h"

#include <spdlog/spdlog.h>

#include <algorithm>

#include "base/json_util.h"
#include "cli/logging.h"

namespace podshaper::op {

using nlohmann::json;

namespace {
// Told-once memories are per pod and forgotten with it; controllers' outlive their pods,
// so that set is bounded by dropping it whole (a controller may then be told again).
constexpr std::size_t kMaxOwnersRemembered = 100000;
// A waiting pod's NotPlaceable is told again for new words at most this often.
constexpr std::chrono::seconds kRetellAfter{600};
// After pods/log answered 403, logs are not asked for again this long.
constexpr std::chrono::seconds kLogsForbiddenFor{600};
}  // namespace

PodReconciler::PodReconciler(ReconcileApi& api, const Clock& clock, metrics::Registry& metrics,
                             std::function<bool()> mayWrite, PodReconcilerOptions options)
    : api_(api),
      clock_(clock),
      mayWrite_(std::move(mayWrite)),
      options_(std::move(options)),
      metrics_(metrics),
      writesEvent_(metrics.counter("podshaper_operator_writes_total", "", {{"kind", "event"}})) {
  // Every series from 0, so that an alert on increase() sees the first Event of each.
  for (const char* cause : kNotPlaceableCauses) podEvents(reasons::kNotPlaceable, cause);
  for (ShmCause cause : {ShmCause::kDataLoader, ShmCause::kNccl, ShmCause::kSigbus}) {
    podEvents(reasons::kShmExhausted, toString(cause));
  }
}

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
  forgetUid(uid);
}

void PodReconciler::forgetUid(const std::string& uid) {
  toldPending_.erase(uid);
  toldFailures_.erase(toldFailures_.lower_bound(uid + "/"), toldFailures_.lower_bound(uid + "0"));
  logEvidence_.erase(logEvidence_.lower_bound(uid + "/"), logEvidence_.lower_bound(uid + "0"));
}

std::map<std::string, std::string> PodReconciler::readLogs(const json& pod, const std::string& ns,
                                                           const std::string& name, bool& failed) {
  std::map<std::string, std::string> logs;
  const auto asks = logsToRead(pod);
  const long long now = clock_.wallMicros() / 1000000;
  {
    // Runs the pod no longer lists (a crash-looping container's older ones) are forgotten.
    std::lock_guard lock(mu_);
    const std::string uid = stringMember(member(pod, "metadata"), "uid");
    for (auto it = logEvidence_.lower_bound(uid + "/"); it != logEvidence_.end() && it->first.starts_with(uid + "/");) {
      const bool asked = std::any_of(asks.begin(), asks.end(), [&](const LogToRead& a) { return a.key == it->first; });
      it = asked ? std::next(it) : logEvidence_.erase(it);
    }
  }
  for (const LogToRead& ask : asks) {
    {
      std::lock_guard lock(mu_);
      if (auto it = logEvidence_.find(ask.key); it != logEvidence_.end()) {
        logs[ask.key] = it->second;
        continue;
      }
      if (logsForbiddenAt_ && now - *logsForbiddenAt_ < kLogsForbiddenFor.count()) continue;
    }
    auto read = api_.readLog(ns, name, ask.container, ask.previous);
    std::string evidence;
    if (read) {
      evidence = shmEvidence(*read);
    } else if (read.error().code == 403) {
      spdlog::warn("pods/log is not allowed ({}): a container's death is judged from its termination message only "
                   "(the log's last 2 KiB) for the next {} minutes; grant the operator pods/log get to read further "
                   "back", read.error().message, kLogsForbiddenFor.count() / 60);
      std::lock_guard lock(mu_);
      logsForbiddenAt_ = now;
      continue;
    } else if (!read.error().isNotFound()) {  // gone (the kubelet keeps two runs): judged from the message
      spdlog::warn("pod {}/{}: the log of container {} could not be read (tried again later): {}", ns, name,
                   ask.container, read.error().message);
      failed = true;
      continue;
    }
    std::lock_guard lock(mu_);
    logEvidence_[ask.key] = evidence;
    logs[ask.key] = std::move(evidence);
  }
  return logs;
}

metrics::Counter& PodReconciler::podEvents(std::string_view reason, std::string_view cause) {
  return metrics_.counter("podshaper_operator_pod_events_total",
                          "Events that explain a shaped pod, by reason (NotPlaceable, ShmExhausted) and cause.",
                          {{"reason", std::string(reason)}, {"cause", std::string(cause)}});
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
  const auto owner = controllerOf(*pod);
  cli::LogObject about(key, owner ? owner->kind + " " + owner->name : "");
  {
    // A pod deleted and made again under its name (a StatefulSet's, a training operator's
    // "job-master-0") before this look: the earlier one's memories go now.
    std::lock_guard lock(mu_);
    auto [it, added] = uidOf_.try_emplace(key, uid);
    if (!added && it->second != uid) {
      forgetUid(it->second);
      it->second = uid;
    }
  }
  bool failed = false;

  for (const ShmFailure& f : judgeTerminations(*pod, readLogs(*pod, ns, self.name, failed))) {
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
      podEvents(reasons::kShmExhausted, toString(f.cause)).inc();
      spdlog::info("pod {}: {} ({}), container {}", key, reasons::kShmExhausted, toString(f.cause), f.container);
      std::lock_guard lock(mu_);
      toldFailures_.insert(f.key);
    }
    // The controller once, whichever of its pods' failures comes first; a failed write is
    // tried again on the next look, even when the pod was told.
    if (owner) {
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
  const long long now = clock_.wallMicros() / 1000000;
  const auto facts = waitsToBeExplained(*pod, now, options_.pendingGrace.count()) ? nodes() : nullptr;
  const PendingJudgement pending = judgePending(*pod, facts ? *facts : kNone, now, options_.pendingGrace.count());
  if (pending.lookAgainAfter) again = std::chrono::seconds(*pending.lookAgainAfter);
  if (pending.event) {
    bool told;
    {
      std::lock_guard lock(mu_);
      auto it = toldPending_.find(uid);
      // Told again when what stops it changes, or when the words change (counts, the
      // scheduler's message) and the last telling is older than kRetellAfter.
      told = it != toldPending_.end() &&
             (it->second.answer == pending.answer ||
              (it->second.cause == pending.cause && now - it->second.at < kRetellAfter.count()));
    }
    if (!told) {
      if (tell(self, ns, *pending.event)) {
        podEvents(reasons::kNotPlaceable, pending.cause).inc();
        spdlog::info("pod {}: {} ({})", key, reasons::kNotPlaceable, pending.cause);
        std::lock_guard lock(mu_);
        toldPending_[uid] = ToldPending{pending.answer, pending.cause, now};
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
