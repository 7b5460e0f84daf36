#pragma once

#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "api/node.h"

namespace podshaper {

// What the webhook knows of the cluster: a snapshot of Namespaces and Nodes
// kept by a watch, so admission never waits on the API server.
struct ClusterView {
  std::map<std::string, Labels> namespaceLabels;
  std::vector<Node> nodes;

  // True once the operator has judged any node (it writes podshaper.io/topology-validated).
  bool hasPodshaperLabels() const;
};

// The view from watched Namespaces and Nodes. Only Nodes with GPUs or podshaper
// labels are kept: CPU nodes never receive a training pod.
ClusterView buildClusterView(const std::vector<nlohmann::json>& namespaces,
                             const std::vector<nlohmann::json>& nodes);

}  // namespace podshaper
