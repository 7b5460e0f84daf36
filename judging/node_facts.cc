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

void addBoundPods(std::vector<NodeFacts>& nodes, const std::vector<json>& shapedPods) {
  struct Bound {
    std::vector<std::string> exclusive, groups;
  };
  std::map<std::string, Bound> bound;
  for (const json& pod : shapedPods) {
    const json& meta = member(pod, "metadata");
    const std::string node = stringMember(member(pod, "spec"), "nodeName");
    const std::string phase = stringMember(member(pod, "status"), "phase");
    if (node.empty() || phase == "Succeeded" || phase == "Failed") continue;
    const json& labels = member(meta, "labels");
    const std::string ns = stringMember(meta, "namespace");
    if (stringMember(labels, names::kPlacementLabel) == names::kNodeExclusive) {
      bound[node].exclusive.push_back(ns + "/" + stringMember(meta, "name"));
    }
    // Any pod of the group, node-exclusive or not: the podAffinity's selector is the label alone.
    if (const std::string group = stringMember(labels, names::kNvlinkGroupLabel); !group.empty()) {
      bound[node].groups.push_back(ns + "/" + group);
    }
  }
  for (NodeFacts& f : nodes) {
    auto it = bound.find(f.node.name);
    if (it == bound.end()) continue;
    f.exclusivePods = std::move(it->second.exclusive);
    std::sort(f.exclusivePods.begin(), f.exclusivePods.end());
    f.nvlinkGroups = std::move(it->second.groups);
    std::sort(f.nvlinkGroups.begin(), f.nvlinkGroups.end());
    f.nvlinkGroups.erase(std::unique(f.nvlinkGroups.begin(), f.nvlinkGroups.end()), f.nvlinkGroups.end());
  }
}

}  // namespace podshaper
