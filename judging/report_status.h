#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "judging/verdict.h"

// What the operator writes for a verdict: the report's status, the Events of
// its transitions and the Node's labels and taint. Pure: the reconciler decides
// when to write, these say what, and whether anything would change.
namespace podshaper {

// The GPUTopologyReport status for a verdict: summary (gpus, interconnect, p2p,
// memlock), the policies, and conditions with lastTransitionTime kept from
// `current` where a condition's status did not change. now: seconds since the epoch.
nlohmann::json reportStatus(const Verdict& verdict, const nlohmann::json& current, long long generation,
                            long long now);

// True when writing `next` over `current` changes what an admin reads.
// observedGeneration is left out of the comparison: the agent's heartbeat bumps
// the report's generation without changing the verdict, and a steady cluster
// must cause no writes.
bool statusChanged(const nlohmann::json& current, const nlohmann::json& next);

struct EventSpec {
  std::string type;  // Normal or Warning
  std::string reason;
  std::string message;
};

// Events for what changed between the conditions in `current` (a status; null
// for a report never judged) and the verdict's: a condition that changed its
// status or reason. The first judgement of a node speaks only of what is wrong,
// plus one Normal TopologyValidated when it passes.
std::vector<EventSpec> transitionEvents(const nlohmann::json& current, const Verdict& verdict);

// A patch (merge, or strategic merge: plan() sends the labels with the condition when the
// taint stays) that brings the Node's podshaper labels and taint to what
// the verdict asks (verdict null: the report is gone, so remove them), guarded
// by the Node's resourceVersion; null when the Node already is so.
nlohmann::json nodePatch(const nlohmann::json& node, const Verdict* verdict);

// A strategic merge patch of the Node's status subresource that brings its condition
// GPUTopologyValidated (names::kNodeCondition) to the verdict's Validated condition
// (verdict null: the report is gone, so remove it); lastTransitionTime kept while the
// status does not change, lastHeartbeatTime the same (a steady cluster writes nothing).
// Null when the Node already says it.
nlohmann::json nodeConditionPatch(const nlohmann::json& node, const Verdict* verdict, long long now);

}  // namespace podshaper
