#include "webhook/config_file.h"

#include "cli/flags.h"

namespace podshaper::webhook {

Result<Config> loadConfig(const std::optional<std::string>& path) {
  if (!path) return Config{};
  auto text = cli::readFile(*path);
  if (!text) return makeError("config: " + text.error().message);
  auto config = parseConfig(*text);
  if (!config) return makeError(*path + ": " + config.error().message);
  return config;
}

}  // namespace podshaper::webhook
