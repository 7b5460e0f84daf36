#pragma once

#include <cstddef>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "api/node.h"

namespace podshaper {

// Nodes alike in all that placement reads of them (podshaper's labels
// topology-validated, memlock, gpu-count, p2p and nvlink-domain; allocatable GPUs;
// memory): one of them (`node`), and which they are (indices into ClusterView::nodes,
// ascending). A cluster of 12,500 nodes has a handful of kinds, or one or a few per NVLink
// domain (700 for 12,500 nodes in racks of 18): admission reads those, not every node.
struct NodeKind {
  Node node;
  std::vector<std::size_t> members;
  // Its members' podshaper.io/nvlink-domain: domain -> nodes (null where none has one), and
  // how many have none. Kinds are not split by domain, so that an admission reads as few
  // kinds on 12,500 nodes in 700 NVLink domains as on 4 nodes.
  std::shared_ptr<const std::map<std::string, std::size_t>> nvlinkDomains;
  std::size_t withoutNvlinkDomain = 0;
};
std::vector<NodeKind> nodeKinds(const std::vector<Node>& nodes);

// What the webhook knows of the cluster: a snapshot of Namespaces and Nodes
// kept by a watch, so admission never waits on the API server.
struct ClusterView {
  std::map<std::string, Labels> namespaceLabels;
  std::vector<Node> nodes;
  // nodeKinds(nodes), as buildClusterView leaves it; empty in a view built by hand, whose
  // kinds are found when they are read (kindsOf).
  std::vector<NodeKind> kinds;
  // False where only the Namespaces are known (`review -f` given Namespaces and no Node):
  // the node class then comes from config, as with no view at all.
  bool nodesKnown = true;

  // True once the operator has judged any node (it writes podshaper.io/topology-validated).
  bool hasPodshaperLabels() const;
};

// The view's kinds: view.kinds, or those of view.nodes put in `scratch` when the view was
// built by hand.
const std::vector<NodeKind>& kindsOf(const ClusterView& view, std::vector<NodeKind>& scratch);

// The view from watched Namespaces and Nodes. Only Nodes with GPUs or podshaper
// labels are kept: CPU nodes never receive a training pod.
ClusterView buildClusterView(const std::vector<nlohmann::json>& namespaces,
                             const std::vector<nlohmann::json>& nodes);
// Its parts, for a cache that reads again only the Nodes that changed: what placement
// reads of a Node (nullopt for a node without GPUs or podshaper's labels), each
// Namespace's labels by name, and the view of those with its kinds.
std::optional<Node> placedNode(const nlohmann::json& node, StringPool& pool);
std::map<std::string, Labels> namespaceLabelsOf(const std::vector<nlohmann::json>& namespaces);
ClusterView clusterViewOf(std::map<std::string, Labels> namespaceLabels, std::vector<Node> nodes);

}  // namespace podshaper
