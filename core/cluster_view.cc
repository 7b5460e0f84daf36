#include "core/cluster_view.h"

#include <algorithm>

#include "core/names.h"
#include "core/quantity.h"

namespace podshaper {

bool ClusterView::hasPodshaperLabels() const {
  for (const auto& node : nodes) {
    if (node.labels.contains(std::string(names::kTopologyValidated))) return true;
  }
  return false;
}

Labels labelsFromJson(const nlohmann::json& object) {
  Labels labels;
  auto metadata = object.find("metadata");
  if (metadata == object.end() || !metadata->is_object()) return labels;
  auto l = metadata->find("labels");
  if (l == metadata->end() || !l->is_object()) return labels;
  for (const auto& [key, value] : l->items()) {
    if (value.is_string()) labels[key] = value.get<std::string>();
  }
  return labels;
}

ClusterView::Node nodeFromJson(const nlohmann::json& node) {
  ClusterView::Node out;
  if (!node.is_object()) return out;
  out.name = node.value("/metadata/name"_json_pointer, std::string());
  out.labels = labelsFromJson(node);
  auto quantityAt = [&](const nlohmann::json::json_pointer& ptr) -> std::optional<int64_t> {
    if (!node.contains(ptr) || !node.at(ptr).is_string()) return std::nullopt;
    auto q = parseQuantity(node.at(ptr).get<std::string>());
    if (!q) return std::nullopt;
    return *q;
  };
  if (auto gpus = quantityAt("/status/allocatable/nvidia.com~1gpu"_json_pointer)) {
    out.gpus = static_cast<uint64_t>(*gpus);
  }
  out.memoryBytes = quantityAt("/status/capacity/memory"_json_pointer);
  return out;
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
    ClusterView::Node node = nodeFromJson(n);
    bool podshaperLabelled = std::any_of(node.labels.begin(), node.labels.end(),
                                         [](const auto& l) { return l.first.starts_with(names::kKeyPrefix); });
    if (node.gpus > 0 || podshaperLabelled) view.nodes.push_back(std::move(node));
  }
  return view;
}

}  // namespace podshaper
