#include "shaping/placement.h"

#include <algorithm>
#include <optional>

#include "api/names.h"
#include "base/json_util.h"
#include "base/text.h"
#include "shaping/request_limits.h"

namespace podshaper {
namespace {

using json = nlohmann::json;

// Adds our required node-label requirements to every nodeSelectorTerm (terms are
// ORed, expressions within one ANDed), or makes the first term. `alternatives`
// holds the requirements a node may meet instead of one another: each term
// becomes one term per alternative, its own expressions and that alternative's.
void requireNodeLabels(JsonEdit& edit, const std::vector<std::vector<JsonText>>& alternatives) {
  const json& now = member(member(member(member(edit.document(), "spec"), "affinity"), "nodeAffinity"),
                           "requiredDuringSchedulingIgnoredDuringExecution");
  const json& written = member(now, "nodeSelectorTerms");
  if (alternatives.size() == 1 && written.is_array() && !written.empty()) {
    // One alternative: each term gets the requirements it lacks, added where it is.
    for (std::size_t i = 0; i < written.size(); ++i) {
      for (const JsonText& r : alternatives.front()) {
        const json& expressions = member(written[i], "matchExpressions");
        if (expressions.is_array() && std::find(expressions.begin(), expressions.end(), r.value) != expressions.end()) {
          continue;
        }
        edit.append({"spec", "affinity", "nodeAffinity", "requiredDuringSchedulingIgnoredDuringExecution",
                     "nodeSelectorTerms", i, "matchExpressions"},
                    r);
      }
    }
    return;
  }
  const json terms = written.is_array() && !written.empty() ? written : json::array({json::object()});
  json shaped = json::array();
  auto holds = [](const json& term, const std::vector<JsonText>& requirements) {
    const json& expressions = member(term, "matchExpressions");
    return expressions.is_array() && std::all_of(requirements.begin(), requirements.end(), [&](const JsonText& r) {
             return std::find(expressions.begin(), expressions.end(), r.value) != expressions.end();
           });
  };
  for (const json& term : terms) {
    // A term that already holds one alternative (a shaped pod's manifest) is kept as it is.
    if (std::any_of(alternatives.begin(), alternatives.end(), [&](const auto& a) { return holds(term, a); })) {
      shaped.push_back(term);
      continue;
    }
    for (const auto& requirements : alternatives) {
      json next = term;
      json& expressions = ensureArray(next, "matchExpressions");
      for (const JsonText& r : requirements) {
        if (std::find(expressions.begin(), expressions.end(), r.value) == expressions.end()) {
          expressions.push_back(r.value);
        }
      }
      shaped.push_back(std::move(next));
    }
  }
  edit.set({"spec", "affinity", "nodeAffinity", "requiredDuringSchedulingIgnoredDuringExecution", "nodeSelectorTerms"},
           std::move(shaped));
}

void requireOnePodPerNode(JsonEdit& edit) {
  edit.set({"metadata", "labels", names::kPlacementLabel}, names::kNodeExclusive);
  static const JsonText term(json{
      {"labelSelector",
       {{"matchExpressions", json::array({labelIs(names::kPlacementLabel, std::string(names::kNodeExclusive)).toJson()})}}},
      {"topologyKey", names::kHostnameLabel},
      // Without it the term would only see pods of this pod's own namespace.
      {"namespaceSelector", json::object()}});
  const json& terms = member(member(member(member(edit.document(), "spec"), "affinity"), "podAntiAffinity"),
                             "requiredDuringSchedulingIgnoredDuringExecution");
  if (!terms.is_array() || std::find(terms.begin(), terms.end(), term.value) == terms.end()) {
    edit.append({"spec", "affinity", "podAntiAffinity", "requiredDuringSchedulingIgnoredDuringExecution"},
                term);
  }
}

// The pod's GPUs as it asks them: "8 nvidia.com/gpu", or "1 GPU" through resource claims.
std::string asked(const PodInputs& in) {
  return in.gpusFromClaims ? counted(in.podGpus, "GPU") : std::to_string(in.podGpus) + " " + in.gpuWords;
}

}  // namespace

Result<NodeFit> fitNodeClass(PodInputs& in, const NodeClass& nodeClass, PartialNodePolicy partialNode) {
  const uint64_t G = nodeClass.gpus;
  if (!in.nodeExclusive && !in.allGpus && nodeClass.largestNode && in.podGpus > *nodeClass.largestNode) {
    return makeError("the pod asks " + asked(in) + " but no node has that many: " + nodeClass.sizes +
                     ": split the job into pods of at most " + counted(*nodeClass.largestNode, "GPU") + " each");
  }
  if (!in.nodeExclusive || in.podGpus == G) return NodeFit{};
  if (in.podGpus > G) {
    return makeError("the pod asks " + asked(in) + " but nodes of its class have " + std::to_string(G) + " (" +
                     nodeClass.source + ")" + (nodeClass.sizes.empty() ? "" : "; " + nodeClass.sizes) +
                     ": split the job into pods of " + counted(G, "GPU") + " each");
  }
  std::string asks = "the pod asks " + asked(in) +
                     " but node-exclusive pods own whole " + std::to_string(G) + "-GPU nodes (" + nodeClass.source +
                     ")";
  const std::string request = "request " + counted(G, "GPU") +
                              (in.gpusFromClaims ? " in all (exactly.count in its resource claims)" : "");
  switch (partialNode) {
    case PartialNodePolicy::kDeny:
      return makeError(asks + ": " + request + " (one rank per GPU), or set " + std::string(names::kPlacement) +
                       ": shared to share the node");
    case PartialNodePolicy::kWarn:
      return NodeFit{GpuFit::kAsAsked, {asks + "; the other GPUs stay idle"}};
    case PartialNodePolicy::kExpand: {
      if (in.gpusFromClaims) {
        // A claim is its own object (the template's, or a claim several pods share):
        // the webhook does not rewrite it.
        return NodeFit{GpuFit::kAsAsked, {asks + "; the other GPUs stay idle: config partialNode: expand does not "
                                                 "raise a resource claim's count, " + request}};
      }
      // The extra GPUs go to the first GPU container; its ranks follow.
      GpuContainer& first = in.gpuContainers.front();
      first.gpus += G - in.podGpus;
      in.podGpus = G;
      return NodeFit{GpuFit::kExpanded, {asks + "; raised container \"" + first.name + "\" to " +
                                         counted(first.gpus, "GPU") + " (config partialNode: expand)"}};
    }
  }
  return NodeFit{};
}

Result<void> placePod(JsonEdit& edit, const PodInputs& in, const NodeClass& nodeClass,
                      const std::vector<std::vector<JsonText>>& nodeRequirements) {
  if (in.nodeExclusive) requireOnePodPerNode(edit);
  if (!nodeClass.placeByLabels) return {};
  if (auto sized = checkNodeAffinitySize(edit.document()); !sized) return sized;
  requireNodeLabels(edit, nodeRequirements);
  return {};
}

}  // namespace podshaper
