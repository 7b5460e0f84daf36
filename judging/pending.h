#pragma once

#include <array>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "judging/events.h"
#include "judging/node_facts.h"

// Why a shaped pod waits Pending (docs/operator.md "Shaped pods explain themselves"). Pure:
// the operator's pod reconciler reads the pods podshaper shaped (label
// podshaper.io/shaped) and its Node and report caches, and records what this says as a
// NotPlaceable Event.
namespace podshaper {

namespace reasons {
inline constexpr const char* kNotPlaceable = "NotPlaceable";
}  // namespace reasons

// What stops a pending pod, in reading order: podshaper's node labels (GPU count,
// validated, memlock, P2P), the pod's own selectors, cordons, taints, the node-exclusive
// rule, the job's NVLink domain (its required podAffinity on podshaper.io/nvlink-domain);
// kScheduler where podshaper's requirements are met.
enum class PendingCause {
  kGpuCount, kValidated, kMemlock, kP2P, kSelector, kCordoned, kTaint, kNodeExclusive, kNvlinkDomain, kScheduler
};
// "gpu-count", "validated", "memlock", "p2p", "selector", "cordoned", "taint",
// "node-exclusive", "nvlink-domain", "scheduler": the metrics' label, not to be changed.
const char* toString(PendingCause cause);
// Every cause, in reading order: the metrics' series start from these.
inline constexpr std::array kPendingCauses = {
    PendingCause::kGpuCount, PendingCause::kValidated,     PendingCause::kMemlock,
    PendingCause::kP2P,      PendingCause::kSelector,      PendingCause::kCordoned,
    PendingCause::kTaint,    PendingCause::kNodeExclusive, PendingCause::kNvlinkDomain,
    PendingCause::kScheduler};


struct PendingJudgement {
  bool pending = false;  // unscheduled, and not going away
  // NotPlaceable, once the pod has waited longer than the grace.
  std::optional<EventSpec> event;
  // The event's message without how long the pod has waited: it is told again only when
  // this changes.
  std::string answer;
  // What stops the nodes that come closest (the last requirement, in reading order, that
  // any node fails), for the metrics; kScheduler when podshaper's requirements are met.
  PendingCause cause = PendingCause::kScheduler;
  // Seconds until the pod should be looked at again (the grace's end, then a steady
  // recheck while it waits); unset when it is not pending.
  std::optional<long long> lookAgainAfter;
};

// Whether judgePending would explain `pod` now (unscheduled past the grace, not held by
// scheduling gates): the nodes' facts are worth gathering only then. now: seconds since
// the epoch.
bool waitsToBeExplained(const nlohmann::json& pod, long long now, long long graceSeconds);

// A pod that no node has taken for longer than `graceSeconds`: which of its requirements
// (podshaper's node labels first, then its own selectors, taints, cordons, the
// node-exclusive rule and its job's NVLink domain) how many nodes fail, with examples.
PendingJudgement judgePending(const nlohmann::json& pod, const std::vector<NodeFacts>& nodes, long long now,
                              long long graceSeconds);

}  // namespace podshaper
