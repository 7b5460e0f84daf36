#include "shaping/memlock_pod.h"

#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <cctype>

#include "api/names.h"

namespace podshaper {
namespace {

// The older key the plugin still reads.
constexpr std::string_view kDeprecatedPrefix = "ulimits.nri.containerd.io/container.";
// An annotation key's name part is at most 63 characters.
constexpr std::size_t kMaxKeyName = 63;

// The one RLIMIT_MEMLOCK entry of a ulimit list, as a block list item at column 0.
std::string memlockEntry(const MemlockLimit& limit) {
  const std::string value = limit.rlimit();
  return "- type: RLIMIT_MEMLOCK\n  soft: " + value + "\n  hard: " + value + "\n";
}

bool isMemlock(std::string type) {
  std::transform(type.begin(), type.end(), type.begin(), [](unsigned char c) { return std::tolower(c); });
  if (type.starts_with("rlimit_")) type = type.substr(7);
  return type == "memlock";
}

// The annotation goes into the JSON Patch, which cannot carry bytes that are not
// UTF-8; yaml-cpp reads a NUL in a scalar as a lone 0x85 byte and writes it so.
bool isUtf8(const std::string& text) {
  try {
    (void)nlohmann::json(text).dump();
    return true;
  } catch (const nlohmann::json::type_error&) {
    return false;
  }
}

// Whether `text` reads as a list of `before` + 1 items, the last one memlock.
bool appendedOneItem(const std::string& text, std::size_t before) {
  try {
    YAML::Node list = YAML::Load(text);
    if (!list.IsSequence() || list.size() != before + 1) return false;
    YAML::Node last = list[before];
    return last.IsMap() && last["type"] && last["type"].IsScalar() && isMemlock(last["type"].Scalar());
  } catch (const YAML::Exception&) {
    return false;
  }
}

}  // namespace

MemlockAnnotation memlockAnnotation(const nlohmann::json& annotations, const std::string& container,
                                    const MemlockLimit& limit) {
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
    YAML::Node list;
    try {
      list = YAML::Load(value);
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
    value += memlockEntry(limit);
    // Appending keeps the user's text as written, but only a block list at
    // column 0 takes another "- " item: a flow list ("[{type: nofile, ...}]"),
    // an indented one or a "..." end became YAML the plugin cannot read, and the
    // container was not created. Those are written out again with the entry added.
    if (!appendedOneItem(value, list.size())) {
      YAML::Emitter e;
      e << YAML::BeginSeq;
      for (const auto& item : list) e << item;
      const std::string rlimit = limit.rlimit();
      e << YAML::BeginMap << YAML::Key << "type" << YAML::Value << "RLIMIT_MEMLOCK" << YAML::Key << "soft"
        << YAML::Value << rlimit << YAML::Key << "hard" << YAML::Value << rlimit << YAML::EndMap;
      e << YAML::EndSeq;
      value = std::string(e.c_str()) + "\n";
      if (!e.good() || !isUtf8(value) || !appendedOneItem(value, list.size())) {
        out.warning = who + "annotation " + key + " could not be extended with memlock; left as it is";
        return out;
      }
    }
    out.set = {key, value};
    return out;
  }
  out.set = {std::string(names::kUlimitAnnotationPrefix) + container, memlockEntry(limit)};
  return out;
}

}  // namespace podshaper
