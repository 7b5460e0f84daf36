#pragma once

#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "base/string_pool.h"

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
// Allocatable nvidia.com/gpu of a Node object, as Node::allocatableGpus.
std::optional<uint64_t> allocatableGpusOf(const nlohmann::json& node);

// A Node's labels as the operator keeps them for every node: (key, value) pairs sorted by
// key, their strings shared between nodes (base/string_pool.h). 80 labels take 2.5 KiB
// here against about 15 KiB in a Labels map.
class SharedLabels {
 public:
  SharedLabels() = default;
  SharedLabels(std::initializer_list<std::pair<std::string, std::string>> labels);
  // The metadata.labels of `object` whose values are strings (as labelsFromJson).
  SharedLabels(const nlohmann::json& object, StringPool& pool);

  // The value of `key`; nullptr when there is no such label.
  const std::string* find(std::string_view key) const;
  std::size_t size() const { return labels_.size(); }

 private:
  void sort();
  std::vector<std::pair<SharedString, SharedString>> labels_;
};

}  // namespace podshaper
