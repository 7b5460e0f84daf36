#include "api/node_labels.h"

#include <algorithm>

#include "api/names.h"
#include "base/json_util.h"
#include "base/quantity.h"

namespace podshaper {

std::vector<std::vector<NodeRequirement>> nodeRequirements(const NodeAsk& ask) {
  std::vector<NodeRequirement> memlock{labelIs(names::kMemlock, std::string(names::kMemlockUnlimited))};
  if (ask.memlock.bytes) {
    memlock.push_back({std::string(names::kMemlock), MatchOp::kGt, {std::to_string(*ask.memlock.bytes - 1)}});
  }
  std::vector<std::vector<NodeRequirement>> alternatives;
  for (NodeRequirement& grants : memlock) {
    std::vector<NodeRequirement> requirements{labelIs(names::kTopologyValidated, "true"), std::move(grants)};
    if (ask.exclusiveGpus) requirements.push_back(labelIs(names::kGpuCount, gpuCountLabel(*ask.exclusiveGpus)));
    if (ask.p2p) requirements.push_back(labelIs(names::kP2P, std::string(names::kP2PAll)));
    alternatives.push_back(std::move(requirements));
  }
  return alternatives;
}

NodeLabelKind nodeLabelKind(std::string_view key) {
  if (key == names::kGpuCount) return NodeLabelKind::kGpuCount;
  if (key == names::kTopologyValidated) return NodeLabelKind::kValidated;
  if (key == names::kMemlock) return NodeLabelKind::kMemlock;
  if (key == names::kP2P) return NodeLabelKind::kP2P;
  return NodeLabelKind::kOther;
}

std::string gpuCountLabel(uint64_t gpus) { return std::to_string(gpus); }

std::optional<uint64_t> gpuCountOf(std::string_view label) {
  auto count = parseCount(label);
  if (!count || gpuCountLabel(*count) != label) return std::nullopt;
  return *count;
}

std::string memlockLabel(const MemlockLimit& granted) { return granted.text(); }

std::string memlockAskedWords(const std::vector<NodeRequirement>& memlockRequirements) {
  std::vector<std::string> options;
  for (const NodeRequirement& r : memlockRequirements) {
    if (r.op == MatchOp::kIn) {
      options.insert(options.end(), r.values.begin(), r.values.end());
    } else if (r.op == MatchOp::kGt && r.values.size() == 1) {
      auto bound = parseCount(r.values.front());
      options.push_back("at least " + (bound ? formatBytes(static_cast<int64_t>(*bound + 1)) : r.values.front()));
    }
  }
  std::sort(options.begin(), options.end());
  options.erase(std::unique(options.begin(), options.end()), options.end());
  std::string out;
  for (const auto& o : options) out += (out.empty() ? "" : " or ") + o;
  return out;
}

nlohmann::json nvlinkGroupTerm(const std::string& group) {
  return {{"labelSelector", {{"matchExpressions", nlohmann::json::array({labelIs(names::kNvlinkGroupLabel, group).toJson()})}}},
          {"topologyKey", names::kNvlinkDomain}};
}

std::optional<std::string> requiredNvlinkGroup(const nlohmann::json& podSpec) {
  const nlohmann::json& terms = member(member(member(podSpec, "affinity"), "podAffinity"),
                                       "requiredDuringSchedulingIgnoredDuringExecution");
  for (const nlohmann::json& term : terms) {
    if (!hasText(member(term, "topologyKey"), names::kNvlinkDomain) || !member(term, "namespaces").is_null() ||
        !member(term, "namespaceSelector").is_null()) {
      continue;
    }
    // The selector's requirements, matchLabels' and matchExpressions' together: the group's alone.
    std::vector<NodeRequirement> selects;
    const nlohmann::json& selector = member(term, "labelSelector");
    if (const nlohmann::json& labels = member(selector, "matchLabels"); labels.is_object()) {
      for (const auto& [k, v] : labels.items()) selects.push_back(labelIs(k, v.is_string() ? v.get<std::string>() : v.dump()));
    }
    for (const nlohmann::json& e : member(selector, "matchExpressions")) selects.push_back(requirementFromJson(e));
    if (selects.size() == 1 && selects[0].key == names::kNvlinkGroupLabel && selects[0].op == MatchOp::kIn &&
        selects[0].values.size() == 1) {
      return selects[0].values[0];
    }
  }
  return std::nullopt;
}

}  // namespace podshaper
