#pragma once

// A Cache held in a map, for the controllers' tests: brought to what a FakeReconcileApi
// holds by follow(), which answers the keys that changed, as a watch would.

#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "operator/caches.h"

namespace podshaper::op {

class MemoryCache : public Cache {
 public:
  // `transform`: what the operator's informer keeps of each object (caches.h).
  explicit MemoryCache(void (*transform)(nlohmann::json&) = nullptr) : transform_(transform) {}

  // The cache becomes `objects` (by API path): the store keys added, changed or gone.
  std::vector<std::string> follow(const std::map<std::string, nlohmann::json>& objects) {
    std::map<std::string, nlohmann::json> next;
    for (const auto& [path, original] : objects) {
      nlohmann::json object = original;
      const auto& m = object["metadata"];
      const std::string key = (m.contains("namespace") ? m["namespace"].get<std::string>() + "/" : std::string()) +
                              m["name"].get<std::string>();
      if (transform_ != nullptr) transform_(object);
      next[key] = std::move(object);
    }
    std::vector<std::string> changed;
    for (const auto& [key, object] : next) {
      auto it = objects_.find(key);
      if (it == objects_.end() || it->second != object) changed.push_back(key);
    }
    for (const auto& [key, object] : objects_) {
      if (!next.contains(key)) changed.push_back(key);
    }
    objects_ = std::move(next);
    return changed;
  }

  std::optional<nlohmann::json> get(const std::string& key) const override {
    auto it = objects_.find(key);
    if (it == objects_.end()) return std::nullopt;
    return it->second;
  }
  std::vector<std::string> keys() const override {
    std::vector<std::string> out;
    for (const auto& [key, object] : objects_) out.push_back(key);
    return out;
  }
  std::vector<nlohmann::json> snapshot() const override {
    std::vector<nlohmann::json> out;
    for (const auto& [key, object] : objects_) out.push_back(object);
    return out;
  }
  std::size_t size() const override { return objects_.size(); }

 private:
  void (*transform_)(nlohmann::json&);
  std::map<std::string, nlohmann::json> objects_;
};

}  // namespace podshaper::op
