#include "judging/policy_status.h"

#include <algorithm>

#include "api/names.h"
#include "api/policy.h"
#include "base/json_util.h"
#include "base/timefmt.h"

namespace podshaper {

using nlohmann::json;

namespace {

const json* findAccepted(const json& status) {
  for (const json& c : member(status, "conditions")) {
    if (stringMember(c, "type") == "Accepted") return &c;
  }
  return nullptr;
}

}  // namespace

json policyStatus(const json& policy, const std::vector<NodeFacts>& nodes, const json& current, long long now) {
  const auto parsed = policyFromJson(policy);
  const json generation = member(member(policy, "metadata"), "generation");
  json condition = {{"type", "Accepted"}};
  if (parsed) {
    condition["status"] = "True";
    condition["reason"] = "Valid";
    condition["message"] = "The operator judges the nodes this policy selects by it.";
  } else {
    condition["status"] = "False";
    condition["reason"] = "Invalid";
    condition["message"] = parsed.error().message + ". The operator leaves this policy out until it is fixed.";
  }
  const json* old = findAccepted(current);
  std::string since = old ? stringMember(*old, "lastTransitionTime") : "";
  if (old == nullptr || stringMember(*old, "status") != condition["status"].get<std::string>() || since.empty()) {
    since = formatTime(now);
  }
  condition["lastTransitionTime"] = since;
  if (!generation.is_null()) condition["observedGeneration"] = generation;

  json status = {{"conditions", json::array({condition})}};
  if (!generation.is_null()) status["observedGeneration"] = generation;
  if (!parsed) return status;

  long long selected = 0, validated = 0, failing = 0, unreported = 0;
  std::vector<const NodeFacts*> failed;
  for (const NodeFacts& n : nodes) {
    // As the verdict selects: by the Node's own labels, not the ones podshaper writes.
    auto own = [&n](const std::string& key) -> const std::string* {
      return key.starts_with(names::kKeyPrefix) ? nullptr : n.node.labels.find(key);
    };
    if (!parsed->nodeSelector.matchesBy(own)) continue;
    ++selected;
    if (n.validated == "True") {
      ++validated;
    } else if (n.validated == "False") {
      ++failing;
      failed.push_back(&n);
    } else {
      ++unreported;
    }
  }
  std::sort(failed.begin(), failed.end(), [](const NodeFacts* a, const NodeFacts* b) { return a->node.name < b->node.name; });
  json named = json::array();
  for (std::size_t i = 0; i < failed.size() && i < kFailingNodesNamed; ++i) {
    named.push_back({{"name", failed[i]->node.name}, {"reason", failed[i]->validatedReason}});
  }
  status["selectedNodes"] = selected;
  status["validatedNodes"] = validated;
  status["failingNodes"] = failing;
  status["unreportedNodes"] = unreported;
  status["failing"] = named;
  return status;
}

json policyStatusPatch(const json& current, const json& next) {
  if (current == next) return nullptr;
  json status = next;
  if (current.is_object()) {
    for (const auto& [key, value] : current.items()) {
      if (!next.contains(key)) status[key] = nullptr;
    }
  }
  return {{"status", status}};
}

std::string policySpecsKey(const std::vector<json>& policies) {
  std::vector<std::string> keys;
  for (const json& p : policies) {
    const json& meta = member(p, "metadata");
    keys.push_back(stringMember(meta, "uid") + "/" + member(meta, "generation").dump());
  }
  std::sort(keys.begin(), keys.end());
  std::string all;
  for (const auto& k : keys) all += k + ";";
  return all;
}

}  // namespace podshaper
