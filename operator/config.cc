#include "operator/config.h"

#include <yaml-cpp/yaml.h>

#include "core/quantity.h"
#include "core/timefmt.h"

namespace podshaper::op {
namespace {

Result<std::string> scalar(const YAML::Node& node, const std::string& key) {
  if (!node.IsScalar()) return makeError(key + ": expected a single value");
  return node.as<std::string>();
}

Result<std::chrono::seconds> duration(const YAML::Node& node, const std::string& key) {
  auto text = scalar(node, key);
  if (!text) return text.error();
  auto seconds = parseDurationSeconds(*text);
  if (!seconds || *seconds <= 0) return makeError(key + ": \"" + *text + "\": expected a duration such as 15s");
  return std::chrono::seconds(*seconds);
}

Result<bool> boolean(const YAML::Node& node, const std::string& key) {
  auto text = scalar(node, key);
  if (!text) return text.error();
  if (*text == "true") return true;
  if (*text == "false") return false;
  return makeError(key + ": \"" + *text + "\": expected true or false");
}

}  // namespace

Result<OperatorConfig> parseOperatorConfig(const std::string& yaml) {
  OperatorConfig c;
  YAML::Node root;
  try {
    root = YAML::Load(yaml);
  } catch (const YAML::Exception& e) {
    return makeError("not YAML: " + std::string(e.what()));
  }
  if (root.IsNull()) return c;
  if (!root.IsMap()) return makeError("expected a map of settings");
  for (const auto& item : root) {
    const std::string key = item.first.as<std::string>();
    const YAML::Node& v = item.second;
    if (key == "listen" || key == "tlsCertFile" || key == "tlsKeyFile" || key == "eventNamespace") {
      auto text = scalar(v, key);
      if (!text) return text.error();
      (key == "listen" ? c.listen : key == "tlsCertFile" ? c.tlsCertFile : key == "tlsKeyFile" ? c.tlsKeyFile
                                                                                                : c.eventNamespace) = *text;
    } else if (key == "workers") {
      auto text = scalar(v, key);
      if (!text) return text.error();
      auto n = parseCount(*text);
      if (!n || *n == 0 || *n > 64) return makeError("workers: \"" + *text + "\": expected 1..64");
      c.workers = static_cast<int>(*n);
    } else if (key == "leaderElection") {
      if (!v.IsMap()) return makeError("leaderElection: expected a map");
      for (const auto& le : v) {
        const std::string sub = le.first.as<std::string>();
        const std::string at = "leaderElection." + sub;
        if (sub == "enabled") {
          auto b = boolean(le.second, at);
          if (!b) return b.error();
          c.leaderElection = *b;
        } else if (sub == "namespace" || sub == "name") {
          auto text = scalar(le.second, at);
          if (!text) return text.error();
          (sub == "namespace" ? c.leaseNamespace : c.leaseName) = *text;
        } else if (sub == "leaseDuration" || sub == "renewDeadline" || sub == "retryPeriod") {
          auto d = duration(le.second, at);
          if (!d) return d.error();
          (sub == "leaseDuration" ? c.leaseDuration : sub == "renewDeadline" ? c.renewDeadline : c.retryPeriod) = *d;
        } else {
          return makeError(at + ": unknown setting");
        }
      }
    } else {
      return makeError(key + ": unknown setting");
    }
  }
  if (c.eventNamespace.empty()) return makeError("eventNamespace: must not be empty");
  if (c.tlsCertFile.empty() != c.tlsKeyFile.empty()) return makeError("tlsCertFile and tlsKeyFile go together");
  return c;
}

}  // namespace podshaper::op
