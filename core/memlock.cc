#include "core/memlock.h"

#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <cctype>

#include "core/names.h"

namespace podshaper {
namespace {

// RLIMIT_INFINITY: the ulimit-adjuster parses soft/hard as uint64; "-1" fails
// to parse and the container is not created (containerd/nri adjuster.go).
constexpr std::string_view kMemlockEntry =
    "- type: RLIMIT_MEMLOCK\n  soft: 18446744073709551615\n  hard: 18446744073709551615\n";
// The older key the plugin still reads.
constexpr std::string_view kDeprecatedPrefix = "ulimits.nri.containerd.io/container.";
// An annotation key's name part is at most 63 characters.
constexpr std::size_t kMaxKeyName = 63;

bool isMemlock(std::string type) {
  std::transform(type.begin(), type.end(), type.begin(), [](unsigned char c) { return std::tolower(c); });
  if (type.starts_with("rlimit_")) type = type.substr(7);
  return type == "memlock";
}

}  // namespace

MemlockAnnotation memlockAnnotation(const nlohmann::json& annotations, const std::string& container) {
  MemlockAnnotation out;
  const std::string who = "container \"" + container + "\": ";
  if (std::string("container.").size() + container.size() > kMaxKeyName) {
    out.warning = who + "name too long for the NRI ulimit annotation key; memlock is left to the node's runtime default";
    return out;
  }
  for (std::string_view prefix : {names::kUlimitAnnotationPrefix, kDeprecatedPrefix}) {
    std::string key = std::string(prefix) + container;
    auto it = annotations.is_object() ? annotations.find(key) : annotations.end();
    if (it == annotations.end() || !it->is_string()) continue;
    std::string value = it->get<std::string>();
    try {
      YAML::Node list = YAML::Load(value);
      if (!list.IsSequence()) throw YAML::Exception(YAML::Mark::null_mark(), "not a list");
      for (const auto& item : list) {
        if (item.IsMap() && item["type"] && item["type"].IsScalar() && isMemlock(item["type"].Scalar())) {
          return out;  // the user chose a memlock limit: theirs to keep
        }
      }
    } catch (const YAML::Exception&) {
      out.warning = who + "annotation " + key + " is not a list of ulimits; left as it is, memlock not set";
      return out;
    }
    if (!value.empty() && value.back() != '\n') value += '\n';
    out.set = {key, value + std::string(kMemlockEntry)};
    return out;
  }
  out.set = {std::string(names::kUlimitAnnotationPrefix) + container, std::string(kMemlockEntry)};
  return out;
}

}  // namespace podshaper
