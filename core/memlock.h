#pragma once

#include <optional>
#include <string>
#include <utility>

#include <nlohmann/json.hpp>

namespace podshaper {

// What to do with a container's NRI ulimit-adjuster annotation so that its
// RLIMIT_MEMLOCK is unlimited: an annotation to set (key, value), and/or a
// warning when that cannot be done.
struct MemlockAnnotation {
  std::optional<std::pair<std::string, std::string>> set;
  std::optional<std::string> warning;
};

// `annotations` is the pod's metadata.annotations (any JSON). A user's own
// ulimit annotation (current or deprecated key) is kept and extended with
// memlock if it lacks it; one that already sets memlock is left alone.
MemlockAnnotation memlockAnnotation(const nlohmann::json& annotations, const std::string& container);

}  // namespace podshaper
