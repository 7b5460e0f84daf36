#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "base/result.h"

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

}  // namespace podshaper
