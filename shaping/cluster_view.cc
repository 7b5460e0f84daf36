#include "shaping/cluster_view.h"

#include <algorithm>

#include "api/names.h"

namespace podshaper {

bool ClusterView::hasPodshaperLabels() const {
  for (const auto& node : nodes) {
    if (node.labels.contains(std::string(names::kTopologyValidated))) return true;
  }
  return false;
}

ClusterView buildClusterView(const std::vector<nlohmann::json>& namespaces,
                             const std::vector<nlohmann::json>& nodes) {
  ClusterView view;
  for (const auto& ns : namespaces) {
    if (!ns.is_object() || !ns.contains("metadata") || !ns["metadata"].is_object()) continue;
    auto name = ns["metadata"].find("name");
    if (name == ns["metadata"].end() || !name->is_string()) continue;
    view.namespaceLabels[name->get<std::string>()] = labelsFromJson(ns);
  }
  for (const auto& n : nodes) {
    Node node = nodeFromJson(n);
    bool podshaperLabelled = std::any_of(node.labels.begin(), node.labels.end(),
                                         [](const auto& l) { return l.first.starts_with(names::kKeyPrefix); });
    if (node.gpus() > 0 || podshaperLabelled) view.nodes.push_back(std::move(node));
  }
  return view;
}

}  // namespace podshaper
