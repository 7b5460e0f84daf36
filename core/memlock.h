#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/result.h"

namespace podshaper {

// RLIMIT_MEMLOCK as podshaper asks for it (webhook config `memlock`, the agent's
// memlock-probe) and as a node grants it: unlimited, or a number of bytes.
struct MemlockLimit {
  std::optional<uint64_t> bytes;  // null: unlimited (RLIM_INFINITY)

  // "unlimited", or the bytes in decimal ("4194304"): the node label
  // podshaper.io/memlock, the report's memlockProbe.requested, the config hash.
  std::string text() const;
  // The NRI ulimit-adjuster's soft and hard: the bytes, or 18446744073709551615.
  std::string rlimit() const;
  // For people: "unlimited", or the bytes as a quantity ("4Mi").
  std::string words() const;
  bool operator==(const MemlockLimit&) const = default;
};

// "unlimited", or a Kubernetes quantity of at least one byte ("4Mi", "64Gi", "4194304").
Result<MemlockLimit> parseMemlockLimit(std::string_view text);

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
