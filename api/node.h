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

// A Node's labels as podshaper keeps them for every node: (key, value) pairs sorted by
// key, their strings shared between nodes when read through one pool (base/string_pool.h).
// 80 labels take 2.5 KiB here against about 15 KiB in a Labels map.
class SharedLabels {
 public:
  using Label = std::pair<SharedString, SharedString>;

  SharedLabels() = default;
  SharedLabels(std::initializer_list<std::pair<std::string, std::string>> labels);
  explicit SharedLabels(const Labels& labels);
  // The metadata.labels of `object` whose values are strings (as labelsFromJson).
  SharedLabels(const nlohmann::json& object, StringPool& pool);

  // The value of `key`; nullptr when there is no such label.
  const std::string* find(std::string_view key) const;
  bool contains(std::string_view key) const { return find(key) != nullptr; }
  // Sets or replaces one label (strings of their own, not pooled: for a few labels).
  void set(std::string_view key, std::string_view value);
  void erase(std::string_view key);
  std::size_t size() const { return labels_.size(); }
  auto begin() const { return labels_.begin(); }
  auto end() const { return labels_.end(); }
  Labels toMap() const;
  bool operator==(const SharedLabels& other) const;

 private:
  void sort();
  std::vector<Label> labels_;
};

struct Taint {
  std::string key, value, effect;
  bool operator==(const Taint&) const = default;
};

// A Kubernetes Node as podshaper reads it, the one type for it: the webhook places pods
// by it, the operator judges a report against it and explains by it why a pod waits.
struct Node {
  std::string name{}, uid{};
  SharedLabels labels{};
  std::vector<Taint> taints{};
  bool unschedulable = false;  // cordoned
  // Allocatable nvidia.com/gpu; unset when the Node does not list it. Absent and
  // "0" differ: no device plugin, or every GPU marked unhealthy.
  std::optional<uint64_t> allocatableGpus{};
  std::optional<int64_t> memoryBytes{};  // capacity memory

  uint64_t gpus() const { return allocatableGpus.value_or(0); }
  const std::string* label(std::string_view key) const { return labels.find(key); }
};

// Plain data out of API objects; fields that are missing or malformed are left unset
// (a listed but unreadable nvidia.com/gpu counts as 0). The labels' strings come from
// `pool` (kept by whoever keeps many Nodes), or are the Node's own.
Node nodeFromJson(const nlohmann::json& node, StringPool& pool);
Node nodeFromJson(const nlohmann::json& node);
Labels labelsFromJson(const nlohmann::json& object);
// Allocatable nvidia.com/gpu of a Node object, as Node::allocatableGpus.
std::optional<uint64_t> allocatableGpusOf(const nlohmann::json& node);

}  // namespace podshaper
