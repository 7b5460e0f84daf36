#include "shaping/node_class.h"

#include <algorithm>
#include <functional>
#include <map>
#include <set>

#include "api/names.h"
#include "base/quantity.h"
#include "base/text.h"

namespace podshaper {
namespace {

const std::string* labelOf(const Node& node, std::string_view key) { return node.label(key); }

// The node's podshaper.io/gpu-count as the scheduler matches it against the "In [G]"
// podshaper writes.
std::optional<uint64_t> gpuCountLabelOf(const Node& node) {
  const std::string* text = labelOf(node, names::kGpuCount);
  auto count = text ? gpuCountOf(*text) : std::nullopt;
  if (!count || *count == 0) return std::nullopt;
  return count;
}

// What every shaped pod's node affinity requires of a node whatever its size: validated,
// granting the memlock asked (api/node_labels.h, as placement writes it).
struct PlaceableBy {
  std::vector<std::vector<NodeRequirement>> terms;
  std::string memlockWords;  // the memlock asked, for people

  explicit PlaceableBy(const MemlockLimit& memlock)
      : terms(nodeRequirements({memlock, std::nullopt, false})), memlockWords(memlock.words()) {}
  bool takes(const Node& node) const {
    return matchesAnyTerm(terms, [&](const std::string& key) { return labelOf(node, key); });
  }
};

// The GPU count a node offers to placement: the operator's label once it has
// judged the node (none when the node affinity keeps the pod off it: not
// validated, or not granting the memlock asked), else the allocatable count.
std::optional<uint64_t> nodeGpus(const Node& node, bool byLabels, const PlaceableBy& placeable) {
  if (!byLabels) return node.gpus() > 0 ? std::optional<uint64_t>(node.gpus()) : std::nullopt;
  if (!placeable.takes(node)) return std::nullopt;
  return gpuCountLabelOf(node);
}

// The GPUs a node has, validated or not: the operator's label, else the allocatable count.
uint64_t nodeSize(const Node& node) {
  if (auto count = gpuCountLabelOf(node)) return *count;
  return node.gpus();
}

// Why a node does not take podshaper's pods now, from its labels.
std::string whyNotPlaceable(const Node& node, const PlaceableBy& placeable) {
  const std::string* validated = labelOf(node, names::kTopologyValidated);
  if (validated == nullptr) return std::string(kNotJudgedWords);
  if (*validated != "true") return "not validated (kubectl describe gtr " + node.name + ")";
  if (!placeable.takes(node)) {
    const std::string* granted = labelOf(node, names::kMemlock);
    return "grants memlock " + (granted ? *granted : std::string("unknown")) + ", not the " + placeable.memlockWords +
           " asked";
  }
  return "no GPU count label";
}

// "node-a (why), node-b (why) and 3 more"
std::string nodesAndWhy(const std::vector<const Node*>& nodes, const PlaceableBy& placeable) {
  return someOf(nodes, 3, [&](const Node* n) { return n->name + " (" + whyNotPlaceable(*n, placeable) + ")"; });
}

// "the cluster's GPU nodes have 4 GPUs (3 nodes) or 2 (1 node)", largest first.
std::string sizesInWords(const std::vector<NodeKind>& kinds) {
  std::map<uint64_t, std::size_t, std::greater<>> bySize;
  for (const auto& kind : kinds) {
    if (uint64_t g = nodeSize(kind.node); g > 0) bySize[g] += kind.members.size();
  }
  if (bySize.empty()) return "the cluster has no GPU node";
  std::string out = "the cluster's GPU nodes have ";
  bool first = true;
  for (const auto& [gpus, count] : bySize) {
    out += (first ? "" : " or ") + (first ? counted(gpus, "GPU") : std::to_string(gpus)) + " (" +
           counted(count, "node") + ")";
    first = false;
  }
  return out;
}

}  // namespace

const std::map<std::string, std::size_t>& NodeClass::nvlinkDomains() const {
  static const std::map<std::string, std::size_t> kNone;
  return nvlinkDomainCounts ? *nvlinkDomainCounts : kNone;
}

NodeClass resolveNodeClass(std::optional<uint64_t> podGpus, std::optional<uint64_t> requestedGpus, bool nodeExclusive,
                           const NodeSettings& settings, const ClusterView* cluster) {
  NodeClass nc;
  if (cluster == nullptr || !cluster->nodesKnown) {
    nc.gpus = requestedGpus.value_or(settings.gpusPerNode);
    nc.memoryBytes = settings.nodeMemory;
    nc.source = requestedGpus ? "from the pod's nodeSelector " + std::string(names::kGpuCount)
                              : "from config defaults.gpusPerNode";
    return nc;
  }

  bool byLabels = cluster->hasPodshaperLabels();
  nc.placeByLabels = byLabels;
  if (!byLabels) {
    nc.warnings.push_back("no node carries " + std::string(names::kTopologyValidated) +
                          " yet (is podshaper-operator running?): node affinity to validated "
                          "nodes left out");
  }

  // Every loop below reads the nodes' kinds, not the nodes: admission costs the same at
  // 12,500 nodes as at 4.
  std::vector<NodeKind> scratch;
  const std::vector<NodeKind>& kinds = kindsOf(*cluster, scratch);
  const PlaceableBy placeable(settings.memlock);
  std::set<uint64_t> classes;
  for (const auto& kind : kinds) {
    if (auto g = nodeGpus(kind.node, byLabels, placeable)) classes.insert(*g);
  }

  // Nodes of the size a node-exclusive pod asks (at least the GPUs a shared pod asks)
  // that placement cannot use now, in the view's order.
  std::vector<const Node*> waitingFor;
  uint64_t smallestWaiting = 0;
  const bool anyClassHolds = podGpus && classes.lower_bound(*podGpus) != classes.end();
  if (!requestedGpus && podGpus && byLabels &&
      (nodeExclusive ? !classes.contains(*podGpus) : !anyClassHolds)) {
    std::vector<std::size_t> members;
    for (const auto& kind : kinds) {
      const uint64_t size = nodeSize(kind.node);
      if (nodeExclusive ? size != *podGpus : size < *podGpus) continue;
      members.insert(members.end(), kind.members.begin(), kind.members.end());
      if (smallestWaiting == 0 || size < smallestWaiting) smallestWaiting = size;
    }
    std::sort(members.begin(), members.end());
    for (std::size_t i : members) waitingFor.push_back(&cluster->nodes[i]);
  }
  for (const auto& kind : kinds) nc.largestNode = std::max(nc.largestNode.value_or(0), nodeSize(kind.node));
  if (nc.largestNode == 0) nc.largestNode.reset();
  nc.sizes = sizesInWords(kinds);

  if (requestedGpus) {
    nc.gpus = *requestedGpus;
    nc.source = "from the pod's nodeSelector " + std::string(names::kGpuCount);
  } else if (!waitingFor.empty()) {
    // A shared pod: the smallest of the nodes that hold it.
    nc.gpus = nodeExclusive ? *podGpus : smallestWaiting;
    nc.source = nodeExclusive ? "the size it asks; nodes of that size exist" : "the nodes that hold it";
    nc.warnings.push_back("no node with " + std::string(nodeExclusive ? "" : "at least ") + counted(*podGpus, "GPU") +
                          " can take the pod now: " + nodesAndWhy(waitingFor, placeable) +
                          ": it waits Pending until one can (kubectl describe pod tells why it waits)");
  } else if (classes.empty()) {
    nc.gpus = settings.gpusPerNode;
    nc.source = "from config defaults.gpusPerNode";
    nc.warnings.push_back("no " + std::string(byLabels ? "validated " : "") +
                          "GPU node found: assuming " + counted(nc.gpus, "GPU") +
                          " per node from config defaults.gpusPerNode");
  } else {
    // The class the pod fits exactly, else the smallest that holds it; the largest for All.
    auto fit = podGpus ? classes.lower_bound(*podGpus) : classes.end();
    nc.gpus = fit != classes.end() ? *fit : *classes.rbegin();
    nc.source = byLabels ? "from the cluster's validated nodes" : "from the cluster's GPU nodes";
    if (!podGpus && classes.size() > 1) {
      nc.warnings.push_back("the pod asks every GPU of its node (allocationMode All) and the cluster has nodes of " +
                            std::to_string(classes.size()) + " GPU counts: shaped for the largest, " +
                            std::to_string(nc.gpus) + "; set nodeSelector " + std::string(names::kGpuCount) +
                            " to choose");
    }
  }

  // The nodes that could take the pod: those placement uses now, else those of its size
  // that wait to be validated. The /dev/shm cap is judged against the least memory among them.
  bool anyTarget = false;
  bool allP2P = true;
  auto fits = [&](uint64_t g) { return nodeExclusive ? g == nc.gpus : g >= podGpus.value_or(nc.gpus); };
  auto countDomain = [&](const NodeKind& kind) {
    nc.withoutNvlinkDomain += kind.withoutNvlinkDomain;
    if (!kind.nvlinkDomains) return;
    if (!nc.nvlinkDomainCounts) {
      nc.nvlinkDomainCounts = kind.nvlinkDomains;
      return;
    }
    auto sum = std::make_shared<std::map<std::string, std::size_t>>(*nc.nvlinkDomainCounts);
    for (const auto& [domain, nodes] : *kind.nvlinkDomains) (*sum)[domain] += nodes;
    nc.nvlinkDomainCounts = std::move(sum);
  };
  for (const auto& kind : kinds) {
    auto g = nodeGpus(kind.node, byLabels, placeable);
    if (!g || !fits(*g)) continue;
    anyTarget = true;
    countDomain(kind);
    if (kind.node.memoryBytes && (!nc.memoryBytes || *kind.node.memoryBytes < *nc.memoryBytes)) {
      nc.memoryBytes = kind.node.memoryBytes;
    }
    if (const std::string* p2p = labelOf(kind.node, names::kP2P); p2p == nullptr || *p2p != names::kP2PAll) {
      allP2P = false;
    }
  }
  if (!anyTarget) {
    for (const auto& kind : kinds) {
      if (!fits(nodeSize(kind.node))) continue;
      countDomain(kind);
      if (!kind.node.memoryBytes) continue;
      if (!nc.memoryBytes || *kind.node.memoryBytes < *nc.memoryBytes) nc.memoryBytes = kind.node.memoryBytes;
    }
  }
  if (!nc.memoryBytes) nc.memoryBytes = settings.nodeMemory;
  nc.p2pAllPairs = byLabels && anyTarget && allP2P;
  return nc;
}

}  // namespace podshaper
