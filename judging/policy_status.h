#pragma once

#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "judging/node_facts.h"

// A TopologyPolicy's status: whether the operator could read it (condition Accepted) and
// which nodes it selects, how many of them are validated and which fail, so that
// `kubectl get topologypolicies` and `kubectl describe` answer "what does this policy do
// to my nodes?". Pure: the operator writes what this says, when it changed.
namespace podshaper {

// At most this many failing nodes are named in status.failingNodes (the count is whole).
inline constexpr std::size_t kFailingNodesNamed = 10;

// The status for `policy` (the TopologyPolicy object) over `nodes`: conditions Accepted
// (True "Valid", or False "Invalid" with the reading error) and, when accepted,
// selectedNodes, validatedNodes, failingNodes, unreportedNodes and the first failing
// nodes by name with their reason. A node counts as validated or failing by its report,
// which every policy that selects it judged together (NodeFacts::validated). lastTransitionTime is kept from
// `current` where the condition did not change. now: seconds since the epoch.
nlohmann::json policyStatus(const nlohmann::json& policy, const std::vector<NodeFacts>& nodes,
                            const nlohmann::json& current, long long now);

// The merge patch of the status subresource that brings `current` to `next` (members
// `next` lacks become null); null when they are the same.
nlohmann::json policyStatusPatch(const nlohmann::json& current, const nlohmann::json& next);

// What identifies the policies' specs (each one's uid and generation): a status write does
// not change it, so the operator re-judges the nodes only when this does.
std::string policySpecsKey(const std::vector<nlohmann::json>& policies);

}  // namespace podshaper
