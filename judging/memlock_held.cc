#include "judging/memlock_held.h"

#include <algorithm>

#include "api/names.h"
#include "base/json_util.h"

namespace podshaper {

using nlohmann::json;

std::vector<MemlockHeld> memlockHeld(const json& pod) {
  std::vector<MemlockHeld> held;
  const json& meta = member(pod, "metadata");
  if (stringMember(member(meta, "labels"), names::kShapedLabel) != "true") return held;
  const std::string name = stringMember(meta, "namespace") + "/" + stringMember(meta, "name");
  for (const char* list : {"initContainerStatuses", "containerStatuses"}) {
    for (const json& cs : member(member(pod, "status"), list)) {
      const std::string message = stringMember(member(member(cs, "state"), "waiting"), "message");
      const std::size_t at = message.find(names::kMemlockNotAppliedMarker);
      if (at == std::string::npos) continue;
      held.push_back({name, stringMember(cs, "name"), message.substr(at + names::kMemlockNotAppliedMarker.size())});
    }
  }
  return held;
}

std::vector<MemlockHeld> memlockHeldOn(const std::string& node, const std::vector<json>& pods) {
  std::vector<MemlockHeld> held;
  for (const json& pod : pods) {
    if (node.empty() || stringMember(member(pod, "spec"), "nodeName") != node) continue;
    for (MemlockHeld& h : memlockHeld(pod)) held.push_back(std::move(h));
  }
  std::stable_sort(held.begin(), held.end(), [](const MemlockHeld& a, const MemlockHeld& b) { return a.pod < b.pod; });
  return held;
}

}  // namespace podshaper
