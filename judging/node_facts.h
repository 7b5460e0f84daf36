#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "api/node.h"
#include "base/string_pool.h"

// What the operator knows of one GPU node: its Node (api/node.h) with its report's verdict
// and the shaped pods bound to it; read from its Node and its report when either
// changes (the operator keeps them, operator/node_table.h), and read by the pending pods'
// explanations (judging/pending.h) and the TopologyPolicies' status
// (judging/policy_status.h). Pure.
namespace podshaper {

struct NodeFacts {
  Node node;  // as the operator's cache keeps it (operator/caches.h compactNode)
  // Its report's Validated condition: status ("True", "False"; empty when there is no
  // report or it was not judged yet) and reason.
  std::string validated, validatedReason;
  // Why a Node labelled not validated is not: the report's Validated reason when it is not
  // True, "no GPUTopologyReport" when there is none; empty when the label says validated
  // or is absent.
  std::string notValidatedReason;
  std::vector<std::string> exclusivePods;  // "namespace/name" of the node-exclusive pods bound to it, not finished
  // "namespace/group" of the podshaper.io/nvlink-group of the pods bound to it, not
  // finished: whose job a podAffinity on podshaper.io/nvlink-domain finds here.
  std::vector<std::string> nvlinkGroups;
};

// The facts of a Node (as the operator's cache keeps it) and its report (null: none),
// without the pods bound to it; the labels' strings from `pool`.
NodeFacts nodeFactsOf(const nlohmann::json& node, const nlohmann::json* report, StringPool& pool);

// Fills exclusivePods and nvlinkGroups of `nodes` from `shapedPods` (the pods podshaper
// shaped): those bound to each node and not finished (the scheduler forgets finished pods),
// sorted, each group once.
void addBoundPods(std::vector<NodeFacts>& nodes, const std::vector<nlohmann::json>& shapedPods);

}  // namespace podshaper
