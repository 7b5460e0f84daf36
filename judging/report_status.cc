#include "judging/report_status.h"

#include "api/names.h"
#include "base/json_util.h"
#include "base/timefmt.h"

namespace podshaper {
namespace {

using nlohmann::json;

const json* findCondition(const json& status, const std::string& type) {
  if (!status.is_object() || !status.contains("conditions") || !status["conditions"].is_array()) return nullptr;
  for (const auto& c : status["conditions"]) {
    if (c.is_object() && c.value("type", json()).is_string() && c["type"].get<std::string>() == type) return &c;
  }
  return nullptr;
}

std::string field(const json* object, const char* key) {
  if (object == nullptr || !object->contains(key) || !(*object)[key].is_string()) return "";
  return (*object)[key].get<std::string>();
}

json withoutGeneration(json status) {
  if (!status.is_object()) return status;
  status.erase("observedGeneration");
  if (status.contains("conditions") && status["conditions"].is_array()) {
    for (auto& c : status["conditions"]) {
      if (c.is_object()) c.erase("observedGeneration");
    }
  }
  return status;
}

const std::string kTaintKey(names::kTopologyTaint);

}  // namespace

json reportStatus(const Verdict& v, const json& current, long long generation, long long now) {
  json conds = json::array();
  for (const auto& c : v.conditions) {
    const json* old = findCondition(current, c.type);
    std::string since = field(old, "lastTransitionTime");
    if (old == nullptr || field(old, "status") != c.status || since.empty()) since = formatTime(now);
    conds.push_back({{"type", c.type},
                     {"status", c.status},
                     {"reason", c.reason},
                     {"message", c.message},
                     {"lastTransitionTime", since},
                     {"observedGeneration", generation}});
  }
  return {{"observedGeneration", generation}, {"gpus", v.gpus},        {"interconnect", v.interconnect},
          {"p2p", v.p2p},                     {"memlock", v.memlock},  {"policies", v.policies},
          {"conditions", conds}};
}

bool statusChanged(const json& current, const json& next) {
  return withoutGeneration(current) != withoutGeneration(next);
}

std::vector<EventSpec> transitionEvents(const json& current, const Verdict& v) {
  std::vector<EventSpec> events;
  const bool first = findCondition(current, conditions::kValidated) == nullptr;
  for (const auto& c : v.conditions) {
    const json* old = findCondition(current, c.type);
    if (old != nullptr && field(old, "status") == c.status && field(old, "reason") == c.reason) continue;
    const bool good = c.status == "True";
    if (c.type == conditions::kValidated) {
      events.push_back({good ? "Normal" : "Warning", good ? "TopologyValidated" : "TopologyNotValidated", c.message});
    } else if (!good) {
      events.push_back({"Warning", c.reason, c.message});
    } else if (!first) {
      events.push_back({"Normal", c.reason, c.message});
    }
  }
  return events;
}

json nodePatch(const json& node, const Verdict* v) {
  const json metadata = node.is_object() ? node.value("metadata", json::object()) : json::object();
  const json labels = metadata.is_object() ? metadata.value("labels", json::object()) : json::object();
  json labelPatch = json::object();
  auto want = [&](const std::string& key, const json& value) {
    const bool has = labels.is_object() && labels.contains(key);
    if (value.is_null() ? has : (!has || labels[key] != value)) labelPatch[key] = value;
  };
  // Each of the operator's labels as the verdict has it; one it leaves out (a domain gone) or
  // all of them (the report gone) removed.
  const std::map<std::string, std::string> wantedLabels = v != nullptr ? nodeLabels(*v) : std::map<std::string, std::string>{};
  for (std::string_view key : kNodeLabelKeys) {
    auto it = wantedLabels.find(std::string(key));
    want(std::string(key), it != wantedLabels.end() ? json(it->second) : json(nullptr));
  }

  const json spec = node.is_object() ? node.value("spec", json::object()) : json::object();
  const json taints = spec.is_object() && spec.contains("taints") && spec["taints"].is_array() ? spec["taints"]
                                                                                              : json::array();
  json kept = json::array();
  json ours = nullptr;
  for (const auto& t : taints) {
    if (t.is_object() && t.value("key", json()).is_string() && t["key"].get<std::string>() == kTaintKey) {
      ours = t;
    } else {
      kept.push_back(t);
    }
  }
  json wanted = nullptr;
  if (v != nullptr && v->taintEffect) {
    const Condition* validated = v->condition(conditions::kValidated);
    wanted = {{"key", kTaintKey},
              {"value", validated ? validated->reason : "Unknown"},
              {"effect", *v->taintEffect}};
  }
  auto same = [](const json& a, const json& b) {
    if (a.is_null() || b.is_null()) return a.is_null() && b.is_null();
    for (const char* k : {"key", "value", "effect"}) {
      if (a.value(k, json()) != b.value(k, json())) return false;
    }
    return true;
  };
  const bool taintChanges = !same(ours, wanted);

  if (labelPatch.empty() && !taintChanges) return nullptr;
  json patch = {{"metadata", {{"resourceVersion", metadata.value("resourceVersion", json(""))}}}};
  if (!labelPatch.empty()) patch["metadata"]["labels"] = labelPatch;
  if (taintChanges) {
    if (!wanted.is_null()) kept.push_back(wanted);
    patch["spec"] = {{"taints", kept}};
  }
  return patch;
}

json nodeConditionPatch(const json& node, const Verdict* verdict, long long now) {
  const std::string type(names::kNodeCondition);
  const json* old = nullptr;
  for (const json& c : member(member(node, "status"), "conditions")) {
    if (stringMember(c, "type") == type) old = &c;
  }
  if (verdict == nullptr) {
    if (old == nullptr) return nullptr;
    return {{"status", {{"conditions", json::array({{{"type", type}, {"$patch", "delete"}}})}}}};
  }
  const Condition* validated = verdict->condition(conditions::kValidated);
  const std::string status = validated ? validated->status : "Unknown";
  const std::string reason = validated ? validated->reason : "Unknown";
  const std::string message = validated ? validated->message : "";
  if (old != nullptr && stringMember(*old, "status") == status && stringMember(*old, "reason") == reason &&
      stringMember(*old, "message") == message) {
    return nullptr;
  }
  std::string since = old ? stringMember(*old, "lastTransitionTime") : "";
  if (old == nullptr || stringMember(*old, "status") != status || since.empty()) since = formatTime(now);
  return {{"status",
           {{"conditions", json::array({{{"type", type},
                                         {"status", status},
                                         {"reason", reason},
                                         {"message", message},
                                         {"lastHeartbeatTime", since},
                                         {"lastTransitionTime", since}}})}}}};
}

}  // namespace podshaper
