#pragma once

#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

namespace podshaper {

// Appends to `patch` (a JSON array) the operations of nlohmann::json::diff(before, after,
// path), the same ones in the same order, without its cost where the two are equal:
// json::diff builds a result array and a path for every member it visits, and a pod's
// long env lists made it a quarter of an admission. Here an equal member costs one
// comparison.
// Appends "/" and `key` as a JSON Pointer token (RFC 6901): "~" is "~0", "/" is "~1".
void appendPointerToken(std::string& pointer, std::string_view key);
// The key a JSON Pointer token names: "~1" is "/", "~0" is "~".
std::string unescapePointerToken(std::string_view token);

void appendDiff(const nlohmann::json& before, const nlohmann::json& after, const std::string& path,
                nlohmann::json& patch);

}  // namespace podshaper
