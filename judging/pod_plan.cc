#include "judging/pod_plan.h"

#include <algorithm>

#include "base/json_util.h"

namespace podshaper {

using nlohmann::json;

PodMemory& PodMemories::of(const std::string& key, const std::string& uid) {
  PodMemory& memory = pods[key];
  if (memory.uid != uid) memory = PodMemory{.uid = uid};
  return memory;
}

ToldState PodMemories::look(const std::string& key, const std::string& uid, const std::string& ownerUid) {
  return {of(key, uid), !ownerUid.empty() && toldOwners.contains(ownerUid), logsForbiddenAt};
}

void PodMemories::learn(const std::string& key, const std::string& uid, const Learnt& learnt) {
  PodMemory& memory = of(key, uid);
  memory.logEvidence = learnt.logEvidence;
  if (learnt.forgetPending) memory.toldPending.reset();
  if (learnt.logsForbiddenAt) logsForbiddenAt = learnt.logsForbiddenAt;
}

void PodMemories::remember(const std::string& key, const std::string& uid, const Told& told) {
  PodMemory& memory = of(key, uid);
  if (!told.failure.empty()) memory.toldFailures.insert(told.failure);
  if (told.pending) memory.toldPending = told.pending;
  if (!told.owner.empty()) {
    if (toldOwners.size() >= kMaxOwnersRemembered) toldOwners.clear();
    toldOwners.insert(told.owner);
  }
}

void PodMemories::forget(const std::string& key) { pods.erase(key); }

PodAsks podAsks(const json& pod, const ToldState& told, long long now, long long graceSeconds) {
  PodAsks asks;
  const bool forbidden = told.logsForbiddenAt && now - *told.logsForbiddenAt < kLogsForbiddenSeconds;
  for (LogToRead& ask : logsToRead(pod)) {
    // Runs the pod no longer lists (a crash-looping container's older ones) are left out: forgotten.
    if (auto it = told.pod.logEvidence.find(ask.key); it != told.pod.logEvidence.end()) {
      asks.known.insert(*it);
    } else if (!forbidden) {
      asks.logs.push_back(std::move(ask));
    }
  }
  asks.nodes = waitsToBeExplained(pod, now, graceSeconds);
  // Only while a failure may be left to tell: a pod whose failures were all told is not
  // read again at each look.
  const bool ownerToTell = !told.ownerTold && controllerOf(pod);
  asks.shmUsage = !asks.logs.empty() ||
                  std::ranges::any_of(judgeTerminations(pod, asks.known), [&](const ShmFailure& f) {
                    return ownerToTell || !told.pod.toldFailures.contains(f.key);
                  });
  return asks;
}

namespace {

// What is known of the logs after this look's reads; what was forbidden or failed is not.
std::map<std::string, std::string> evidenceAfter(const PodPlanInputs& in, PodPlan& plan) {
  std::map<std::string, std::string> evidence = in.asks->known;
  if (in.reads == nullptr) return evidence;
  for (const auto& [key, read] : *in.reads) {
    switch (read.kind) {
      case LogRead::Kind::Read:
        evidence[key] = shmEvidence(read.text);
        break;
      case LogRead::Kind::Gone:  // judged from the message, not asked again
        evidence[key];
        break;
      case LogRead::Kind::Forbidden:
        plan.learnt.logsForbiddenAt = in.now;
        break;
      case LogRead::Kind::Failed:
        plan.readFailed = true;
        break;
    }
  }
  return evidence;
}

void planFailures(const PodPlanInputs& in, const ObjectRef& self, PodPlan& plan) {
  const auto owner = controllerOf(*in.pod);
  std::vector<std::size_t> ownerTells;
  for (const ShmFailure& f : judgeTerminations(*in.pod, plan.learnt.logEvidence, in.shmUsage)) {
    std::optional<std::size_t> podTell;
    if (!in.told->pod.toldFailures.contains(f.key)) {
      podTell = plan.tells.size();
      plan.tells.push_back({.about = self,
                            .event = f.event,
                            .cause = toString(f.cause),
                            .container = f.container,
                            .remember = {.failure = f.key}});
    }
    // The controller once, whichever of its pods' failures is told first; a failed write is
    // tried again on the next look, even when the pod was told.
    if (owner && !in.told->ownerTold) {
      plan.tells.push_back(
          {.about = *owner, .event = ownerEvent(*in.pod, f), .after = podTell, .unless = ownerTells,
           .remember = {.owner = owner->uid}});
      ownerTells.push_back(plan.tells.size() - 1);
    }
  }
}

// A pod the kubelet failed at admission: told on the pod once.
void planRejection(const PodPlanInputs& in, const ObjectRef& self, PodPlan& plan) {
  const auto rejection = judgeKubeletRejection(*in.pod);
  if (!rejection || in.told->pod.toldFailures.contains(rejection->key)) return;
  plan.tells.push_back({.about = self,
                        .event = rejection->event,
                        .cause = toString(rejection->cause),
                        .remember = {.failure = rejection->key}});
}

void planPending(const PodPlanInputs& in, const ObjectRef& self, PodPlan& plan) {
  static const std::vector<NodeFacts> kNone;
  const PendingJudgement pending =
      judgePending(*in.pod, in.nodes != nullptr ? *in.nodes : kNone, in.now, in.graceSeconds);
  plan.lookAgainAfter = pending.lookAgainAfter;
  if (!pending.event) {
    plan.learnt.forgetPending = !pending.pending;
    return;
  }
  // Told again when what stops it changes, or when the words change (counts, the
  // scheduler's message) and the last telling is older than kRetellAfterSeconds.
  const auto& told = in.told->pod.toldPending;
  if (told && (told->answer == pending.answer ||
               (told->cause == pending.cause && in.now - told->at < kRetellAfterSeconds))) {
    return;
  }
  plan.tells.push_back({.about = self,
                        .event = *pending.event,
                        .cause = toString(pending.cause),
                        .remember = {.pending = ToldPending{pending.answer, pending.cause, in.now}}});
}

}  // namespace

PodPlan planPod(const PodPlanInputs& in) {
  PodPlan plan;
  const json& meta = member(*in.pod, "metadata");
  const ObjectRef self{"v1", "Pod", stringMember(meta, "name"), stringMember(meta, "uid"),
                       stringMember(meta, "namespace")};
  plan.learnt.logEvidence = evidenceAfter(in, plan);
  planFailures(in, self, plan);
  planRejection(in, self, plan);
  planPending(in, self, plan);
  return plan;
}

}  // namespace podshaper
