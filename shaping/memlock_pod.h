#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "api/memlock.h"

// What a pod gets for locked memory: the nodes it may land on (by the
// podshaper.io/memlock label the operator writes) and the NRI ulimit annotation.
namespace podshaper {

// The nodeAffinity expressions on podshaper.io/memlock that admit a node granting
// `asked`: In [unlimited] for unlimited; for a number of bytes Q, two alternatives,
// In [unlimited] or Gt [Q-1] (Gt compares the label as an integer). Each goes
// into its own nodeSelectorTerm (terms are ORed).
std::vector<nlohmann::json> memlockRequirements(const MemlockLimit& asked);

// Whether a node labelled podshaper.io/memlock=`label` grants `asked`, as
// memlockRequirements() selects: unlimited grants anything, a number of bytes
// grants up to itself; not-granted, unknown or another word grants nothing.
bool memlockLabelGrants(std::string_view label, const MemlockLimit& asked);

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
