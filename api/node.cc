#include "api/node.h"

#include "api/names.h"
#include "base/quantity.h"

namespace podshaper {

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

Node nodeFromJson(const nlohmann::json& node) {
  Node out;
  if (!node.is_object()) return out;
  out.name = node.value("/metadata/name"_json_pointer, std::string());
  if (const auto uid = "/metadata/uid"_json_pointer; node.contains(uid) && node.at(uid).is_string()) {
    out.uid = node.at(uid).get<std::string>();
  }
  out.labels = labelsFromJson(node);
  auto quantityAt = [&](const nlohmann::json::json_pointer& ptr) -> std::optional<int64_t> {
    if (!node.contains(ptr) || !node.at(ptr).is_string()) return std::nullopt;
    auto q = parseQuantity(node.at(ptr).get<std::string>());
    if (!q) return std::nullopt;
    return *q;
  };
  const auto gpusAt = "/status/allocatable"_json_pointer / std::string(names::kGpuResource);
  if (auto gpus = quantityAt(gpusAt)) {
    out.allocatableGpus = static_cast<uint64_t>(*gpus);
  } else if (node.contains(gpusAt)) {
    out.allocatableGpus = 0;
  }
  out.memoryBytes = quantityAt("/status/capacity/memory"_json_pointer);
  return out;
}

}  // namespace podshaper
