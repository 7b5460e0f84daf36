#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace podshaper {

using Labels = std::map<std::string, std::string>;

// What the webhook knows of the cluster: a snapshot of Namespaces and Nodes
// kept by a watch, so admission never waits on the API server.
struct ClusterView {
  struct Node {
    std::string name;
    Labels labels;
    uint64_t gpus = 0;                   // allocatable nvidia.com/gpu
    std::optional<int64_t> memoryBytes;  // capacity memory
  };
  std::map<std::string, Labels> namespaceLabels;
  std::vector<Node> nodes;

  // True once the operator has judged any node (it writes podshaper.io/topology-validated).
  bool hasPodshaperLabels() const;
};

// The view from watched Namespaces and Nodes. Only Nodes with GPUs or podshaper
// labels are kept: CPU nodes never receive a training pod.
ClusterView buildClusterView(const std::vector<nlohmann::json>& namespaces,
                             const std::vector<nlohmann::json>& nodes);

// Plain data out of API objects; fields that are missing or malformed are left unset.
ClusterView::Node nodeFromJson(const nlohmann::json& node);
Labels labelsFromJson(const nlohmann::json& object);

}  // namespace podshaper
