#pragma once

#include <optional>
#include <string>

#include "base/result.h"
#include "shaping/config.h"

namespace podshaper::webhook {

// The config from --config, or the defaults when no file is given.
Result<Config> loadConfig(const std::optional<std::string>& path);

inline constexpr const char* kShaperVersion = "podshaper-webhook/" PODSHAPER_VERSION;

}  // namespace podshaper::webhook
