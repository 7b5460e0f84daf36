#include "judging/node_facts.h"

#include <algorithm>
#include <map>

#include "api/names.h"
#include "base/json_util.h"
#include "judging/verdict.h"

namespace podshaper {

using nlohmann::json;

NodeFacts nodeFactsOf(const json& node, const json* report, StringPool& pool) {
  NodeFacts f;
  f.node = nodeFromJson(node, pool);
  if (report != nullptr) {
    for (const json& c : member(member(*report, "status"), "conditions")) {
      if (stringMember(c, "type") != conditions::kValidated) continue;
      f.validated = stringMember(c, "status");
      f.validatedReason = stringMember(c, "reason");
    }
  }
  const std::string* label = f.node.label(names::kTopologyValidated);
  if (label != nullptr && *label != "true") {
    if (report == nullptr) {
      f.notValidatedReason = "no GPUTopologyReport";
    } else if (f.validated != "True") {
      f.notValidatedReason = f.validatedReason;
    }
  }
  return f;
}

void addExclusivePods(std::vector<NodeFacts>& nodes, const std::vector<json>& shapedPods) {
  std::map<std::string, std::vector<std::string>> exclusive;
  for (const json& pod : shapedPods) {
    const json& meta = member(pod, "metadata");
    if (stringMember(member(meta, "labels"), names::kPlacementLabel) != names::kNodeExclusive) continue;
    const std::string node = stringMember(member(pod, "spec"), "nodeName");
    const std::string phase = stringMember(member(pod, "status"), "phase");
    if (node.empty() || phase == "Succeeded" || phase == "Failed") continue;
    exclusive[node].push_back(stringMember(meta, "namespace") + "/" + stringMember(meta, "name"));
  }
  for (NodeFacts& f : nodes) {
    auto it = exclusive.find(f.node.name);
    if (it == exclusive.end()) continue;
    f.exclusivePods = std::move(it->second);
    std::sort(f.exclusivePods.begin(), f.exclusivePods.end());
  }
}

}  // namespace podshaper
