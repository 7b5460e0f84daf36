#pragma once

// Where a shaped pod may run (docs/webhook.md "One pod per node, or one pod per GPU", "A
// pod that could wait is not refused"): the GPUs it asks against
// the nodes of its class, alone on its node when node-exclusive, and on the nodes the
// operator validated that grant what it needs.
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "base/json_edit.h"
#include "base/result.h"
#include "shaping/config.h"
#include "shaping/node_class.h"
#include "shaping/pod_inputs.h"

namespace podshaper {

enum class GpuFit {
  kAsAsked,   // the pod keeps the GPUs it asked
  kExpanded,  // config partialNode: expand raised its first GPU container to the node's GPUs
};

// The pod's GPUs against the nodes of its class: a node-exclusive pod owns a whole
// node. Errors: a size no node has, more than the class has, fewer under partialNode: deny.
struct NodeFit {
  GpuFit fit = GpuFit::kAsAsked;
  std::vector<std::string> warnings;
};
Result<NodeFit> fitNodeClass(PodInputs& in, const NodeClass& nodeClass, PartialNodePolicy partialNode);

// Alone on its node (node-exclusive), and on nodes the operator validated, with the
// class's GPUs, granting the memlock asked; with P2P between all GPU pairs where its
// NCCL reserve counts on P2P (a node without it would need more).
// `nodeRequirements`: the requirements of what the pod asks (NodeRequirementsText).
Result<void> placePod(JsonEdit& edit, const PodInputs& in, const NodeClass& nodeClass,
                      const std::vector<std::vector<JsonText>>& nodeRequirements);

}  // namespace podshaper
