#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "api/memlock.h"

// What a pod's containers get for locked memory: the NRI ulimit annotation. The nodes
// it may land on for it are api/node_labels.h's.
namespace podshaper {

// What to do with a container's NRI ulimit-adjuster annotation so that its
// RLIMIT_MEMLOCK is the limit asked: an annotation to set (key, value), and/or a
// warning when that cannot be done.
struct MemlockAnnotation {
  std::optional<std::pair<std::string, std::string>> set;
  std::optional<std::string> warning;
};

// `annotations` is the pod's metadata.annotations (any JSON). A user's own
// ulimit annotation (current or deprecated key) is kept and extended with
// memlock if it lacks it; one that already sets memlock is left alone.
// The entry podshaper writes: RLIMIT_MEMLOCK soft = hard = `limit`.
MemlockAnnotation memlockAnnotation(const nlohmann::json& annotations, const std::string& container,
                                    const MemlockLimit& limit);

}  // namespace podshaper
