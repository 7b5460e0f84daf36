#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

namespace podshaper {

using Labels = std::map<std::string, std::string>;

// What podshaper reads of a Kubernetes Node: the webhook places pods by it, the
// operator judges a report against it.
struct Node {
  std::string name{}, uid{};
  Labels labels{};
  // Allocatable nvidia.com/gpu; unset when the Node does not list it. Absent and
  // "0" differ: no device plugin, or every GPU marked unhealthy.
  std::optional<uint64_t> allocatableGpus{};
  std::optional<int64_t> memoryBytes{};  // capacity memory

  uint64_t gpus() const { return allocatableGpus.value_or(0); }
};

// Plain data out of API objects; fields that are missing or malformed are left unset
// (a listed but unreadable nvidia.com/gpu counts as 0).
Node nodeFromJson(const nlohmann::json& node);
Labels labelsFromJson(const nlohmann::json& object);

}  // namespace podshaper
