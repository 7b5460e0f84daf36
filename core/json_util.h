#pragma once

#include <string_view>

#include <nlohmann/json.hpp>

namespace podshaper {

// object[key] without copying and without inserting: a reference to the member,
// or to a null when `object` is not an object or has no such key. (json::value()
// returns a copy: on a 10 KB pod that is most of an admission's time.)
inline const nlohmann::json& member(const nlohmann::json& object, std::string_view key) {
  static const nlohmann::json kNull;
  if (!object.is_object()) return kNull;
  auto it = object.find(key);
  return it == object.end() ? kNull : *it;
}

}  // namespace podshaper
