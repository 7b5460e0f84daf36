#include "shaping/cluster_view.h"

#include <algorithm>
#include <tuple>

#include "api/names.h"

namespace podshaper {

std::vector<NodeKind> nodeKinds(const std::vector<Node>& nodes) {
  using Key = std::tuple<std::vector<std::pair<std::string_view, std::string>>, std::optional<uint64_t>,
                         std::optional<int64_t>>;
  std::map<Key, std::size_t> index;
  std::vector<NodeKind> kinds;
  for (std::size_t i = 0; i < nodes.size(); ++i) {
    const Node& node = nodes[i];
    std::vector<std::pair<std::string_view, std::string>> placed;
    for (std::string_view key : {names::kTopologyValidated, names::kMemlock, names::kGpuCount, names::kP2P}) {
      if (const std::string* value = node.label(key)) placed.emplace_back(key, *value);
    }
    Key key{std::move(placed), node.allocatableGpus, node.memoryBytes};
    auto [at, fresh] = index.try_emplace(std::move(key), kinds.size());
    if (fresh) {
      NodeKind kind;
      kind.node.name = node.name;
      for (const auto& [key, value] : std::get<0>(at->first)) kind.node.labels.set(key, value);
      kind.node.allocatableGpus = node.allocatableGpus;
      kind.node.memoryBytes = node.memoryBytes;
      kinds.push_back(std::move(kind));
    }
    kinds[at->second].members.push_back(i);
  }
  for (NodeKind& kind : kinds) {
    std::map<std::string, std::size_t> domains;
    for (std::size_t i : kind.members) {
      if (const std::string* domain = nodes[i].label(names::kNvlinkDomain)) {
        ++domains[*domain];
      } else {
        ++kind.withoutNvlinkDomain;
      }
    }
    if (!domains.empty()) kind.nvlinkDomains = std::make_shared<const std::map<std::string, std::size_t>>(std::move(domains));
  }
  return kinds;
}

const std::vector<NodeKind>& kindsOf(const ClusterView& view, std::vector<NodeKind>& scratch) {
  if (!view.kinds.empty() || view.nodes.empty()) return view.kinds;
  scratch = nodeKinds(view.nodes);
  return scratch;
}

bool ClusterView::hasPodshaperLabels() const {
  std::vector<NodeKind> scratch;
  for (const NodeKind& kind : kindsOf(*this, scratch)) {
    if (kind.node.labels.contains(names::kTopologyValidated)) return true;
  }
  return false;
}

std::optional<Node> placedNode(const nlohmann::json& object, StringPool& pool) {
  Node node = nodeFromJson(object, pool);
  bool podshaperLabelled = std::any_of(node.labels.begin(), node.labels.end(),
                                       [](const auto& l) { return l.first->starts_with(names::kKeyPrefix); });
  if (node.gpus() == 0 && !podshaperLabelled) return std::nullopt;
  return node;
}

std::map<std::string, Labels> namespaceLabelsOf(const std::vector<nlohmann::json>& namespaces) {
  std::map<std::string, Labels> out;
  for (const auto& ns : namespaces) {
    if (!ns.is_object() || !ns.contains("metadata") || !ns["metadata"].is_object()) continue;
    auto name = ns["metadata"].find("name");
    if (name == ns["metadata"].end() || !name->is_string()) continue;
    out[name->get<std::string>()] = labelsFromJson(ns);
  }
  return out;
}

ClusterView clusterViewOf(std::map<std::string, Labels> namespaceLabels, std::vector<Node> nodes) {
  ClusterView view;
  view.namespaceLabels = std::move(namespaceLabels);
  view.nodes = std::move(nodes);
  view.kinds = nodeKinds(view.nodes);
  return view;
}

ClusterView buildClusterView(const std::vector<nlohmann::json>& namespaces,
                             const std::vector<nlohmann::json>& nodes) {
  std::vector<Node> placed;
  StringPool pool;
  for (const auto& n : nodes) {
    if (auto node = placedNode(n, pool)) placed.push_back(std::move(*node));
  }
  return clusterViewOf(namespaceLabelsOf(namespaces), std::move(placed));
}

}  // namespace podshaper
