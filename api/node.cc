#include "api/node.h"

#include <algorithm>

#include "api/names.h"
#include "base/json_util.h"
#include "base/quantity.h"

namespace podshaper {
namespace {

std::optional<int64_t> quantityAt(const nlohmann::json& node, const nlohmann::json::json_pointer& at) {
  if (!node.contains(at) || !node.at(at).is_string()) return std::nullopt;
  auto q = parseQuantity(node.at(at).get<std::string>());
  if (!q) return std::nullopt;
  return *q;
}

}  // namespace

Labels labelsFromJson(const nlohmann::json& object) {
  Labels labels;
  auto metadata = object.find("metadata");
  if (metadata == object.end() || !metadata->is_object()) return labels;
  auto l = metadata->find("labels");
  if (l == metadata->end() || !l->is_object()) return labels;
  for (const auto& [key, value] : l->items()) {
    if (value.is_string()) labels[key] = value.get<std::string>();
  }
  return labels;
}

Node nodeFromJson(const nlohmann::json& node, StringPool& pool) {
  Node out;
  if (!node.is_object()) return out;
  out.name = node.value("/metadata/name"_json_pointer, std::string());
  if (const auto uid = "/metadata/uid"_json_pointer; node.contains(uid) && node.at(uid).is_string()) {
    out.uid = node.at(uid).get<std::string>();
  }
  out.labels = SharedLabels(node, pool);
  const nlohmann::json& spec = member(node, "spec");
  for (const nlohmann::json& t : member(spec, "taints")) {
    out.taints.push_back({stringMember(t, "key"), stringMember(t, "value"), stringMember(t, "effect")});
  }
  out.unschedulable = member(spec, "unschedulable") == true;
  out.allocatableGpus = allocatableGpusOf(node);
  out.memoryBytes = quantityAt(node, "/status/capacity/memory"_json_pointer);
  return out;
}

Node nodeFromJson(const nlohmann::json& node) {
  StringPool pool;
  return nodeFromJson(node, pool);
}

std::optional<uint64_t> allocatableGpusOf(const nlohmann::json& node) {
  if (!node.is_object()) return std::nullopt;
  const auto gpusAt = "/status/allocatable"_json_pointer / std::string(names::kGpuResource);
  if (auto gpus = quantityAt(node, gpusAt)) return static_cast<uint64_t>(*gpus);
  if (node.contains(gpusAt)) return 0;  // listed but unreadable
  return std::nullopt;
}

SharedLabels::SharedLabels(std::initializer_list<std::pair<std::string, std::string>> labels) {
  StringPool pool;
  for (const auto& [key, value] : labels) labels_.emplace_back(pool.intern(key), pool.intern(value));
  sort();
}

SharedLabels::SharedLabels(const Labels& labels) {
  StringPool pool;
  for (const auto& [key, value] : labels) labels_.emplace_back(pool.intern(key), pool.intern(value));
}

SharedLabels::SharedLabels(const nlohmann::json& object, StringPool& pool) {
  auto metadata = object.find("metadata");
  if (metadata == object.end() || !metadata->is_object()) return;
  auto l = metadata->find("labels");
  if (l == metadata->end() || !l->is_object()) return;
  labels_.reserve(l->size());
  for (const auto& [key, value] : l->items()) {
    if (value.is_string()) labels_.emplace_back(pool.intern(key), pool.intern(value.get_ref<const std::string&>()));
  }
  sort();  // nlohmann's objects are sorted already; a hand-made list may not be
}

void SharedLabels::sort() {
  std::stable_sort(labels_.begin(), labels_.end(), [](const auto& a, const auto& b) { return *a.first < *b.first; });
  // A key given twice keeps its last value, as a map assigned in order would.
  auto last = std::unique(labels_.rbegin(), labels_.rend(),
                          [](const auto& a, const auto& b) { return *a.first == *b.first; });
  labels_.erase(labels_.begin(), last.base());
}

void SharedLabels::set(std::string_view key, std::string_view value) {
  labels_.emplace_back(std::make_shared<const std::string>(key), std::make_shared<const std::string>(value));
  sort();
}

void SharedLabels::erase(std::string_view key) {
  std::erase_if(labels_, [&](const Label& l) { return *l.first == key; });
}

Labels SharedLabels::toMap() const {
  Labels out;
  for (const auto& [key, value] : labels_) out.emplace(*key, *value);
  return out;
}

bool SharedLabels::operator==(const SharedLabels& other) const {
  return std::equal(labels_.begin(), labels_.end(), other.labels_.begin(), other.labels_.end(),
                    [](const Label& a, const Label& b) { return *a.first == *b.first && *a.second == *b.second; });
}

const std::string* SharedLabels::find(std::string_view key) const {
  auto it = std::lower_bound(labels_.begin(), labels_.end(), key,
                             [](const auto& label, std::string_view k) { return *label.first < k; });
  return it != labels_.end() && *it->first == key ? it->second.get() : nullptr;
}

}  // namespace podshaper
