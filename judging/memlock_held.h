#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

// The containers of shaped pods that podshaper-shm holds back because their node does not
// apply the memlock their ulimit annotation asks (its NRI ulimit-adjuster plugin is not
// running): the kubelet shows each waiting with CreateContainerError and a message that
// carries names::kMemlockNotAppliedMarker. The operator judges such a node not validated
// (judging/verdict.h, reason MemlockNotApplied) until none is held there. Pure.
namespace podshaper {

struct MemlockHeld {
  std::string pod;        // "namespace/name"
  std::string container;  // a container or init container of it
  std::string words;      // what podshaper-shm says, after the marker
  bool operator==(const MemlockHeld&) const = default;
};

// The held containers of `pod` (labelled podshaper.io/shaped=true; none for another pod),
// init containers first, each in the order of its status list.
std::vector<MemlockHeld> memlockHeld(const nlohmann::json& pod);

// The held containers of the shaped pods bound to `node` (spec.nodeName), sorted by pod.
std::vector<MemlockHeld> memlockHeldOn(const std::string& node, const std::vector<nlohmann::json>& pods);

}  // namespace podshaper
