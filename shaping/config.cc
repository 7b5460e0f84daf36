#include "shaping/config.h"

#include <yaml-cpp/yaml.h>

#include <charconv>
#include <cstdio>
#include <functional>
#include <map>
#include <set>

#include "base/quantity.h"

namespace podshaper {
namespace {

Error keyError(const std::string& key, const std::string& why) {
  return makeError("config: " + key + ": " + why);
}

Result<std::string> scalar(const YAML::Node& node, const std::string& key) {
  if (!node.IsScalar()) return keyError(key, "expected a single value");
  return node.Scalar();
}

Result<uint64_t> count(const YAML::Node& node, const std::string& key, uint64_t min, uint64_t max) {
  auto text = scalar(node, key);
  if (!text) return text.error();
  auto value = parseCount(*text);
  if (!value) return keyError(key, value.error().message);
  if (*value < min || *value > max) {
    return keyError(key, std::to_string(*value) + " is out of range " + std::to_string(min) +
                             ".." + std::to_string(max));
  }
  return *value;
}

Result<int64_t> quantity(const YAML::Node& node, const std::string& key) {
  auto text = scalar(node, key);
  if (!text) return text.error();
  auto value = parseQuantity(*text);
  if (!value) return keyError(key, value.error().message);
  return *value;
}

// Walks a mapping, rejecting keys it does not know.
Result<void> forEachKey(const YAML::Node& map, const std::string& prefix,
                        const std::map<std::string, std::function<Result<void>(const YAML::Node&)>>& handlers) {
  if (!map.IsMap()) return keyError(prefix.empty() ? "(top level)" : prefix, "expected a mapping");
  for (const auto& item : map) {
    if (!item.first.IsScalar()) return keyError(prefix.empty() ? "(top level)" : prefix, "keys must be plain names");
    std::string key = item.first.Scalar();
    std::string path = prefix.empty() ? key : prefix + "." + key;
    auto handler = handlers.find(key);
    if (handler == handlers.end()) {
      std::string known;
      for (const auto& [name, _] : handlers) known += (known.empty() ? "" : ", ") + name;
      return keyError(path, "unknown key (known here: " + known + ")");
    }
    auto r = handler->second(item.second);
    if (!r) return r.error();
  }
  return {};
}

using Handler = std::function<Result<void>(const YAML::Node&)>;

// Handlers that read one key into `field`.
Handler setCount(uint64_t& field, const std::string& key, uint64_t min, uint64_t max) {
  return [&field, key, min, max](const YAML::Node& n) -> Result<void> {
    auto v = count(n, key, min, max);
    if (!v) return v.error();
    field = *v;
    return {};
  };
}

template <class Field>
Handler setQuantity(Field& field, const std::string& key) {
  return [&field, key](const YAML::Node& n) -> Result<void> {
    auto v = quantity(n, key);
    if (!v) return v.error();
    field = *v;
    return {};
  };
}

// true or false, as YAML 1.2 writes them (not yes/no/on/off: a typo must not read as a choice).
Handler setBool(bool& field, const std::string& key) {
  return [&field, key](const YAML::Node& n) -> Result<void> {
    auto v = scalar(n, key);
    if (!v) return v.error();
    if (*v == "true") field = true;
    else if (*v == "false") field = false;
    else return keyError(key, "\"" + *v + "\" is not one of true, false");
    return {};
  };
}

// A choice among named values, as toString writes each.
template <class Choice>
Handler setOneOf(Choice& field, const std::string& key, std::initializer_list<Choice> choices) {
  return [&field, key, all = std::vector<Choice>(choices)](const YAML::Node& n) -> Result<void> {
    auto v = scalar(n, key);
    if (!v) return v.error();
    std::string names;
    for (Choice c : all) {
      if (*v == toString(c)) {
        field = c;
        return {};
      }
      names += (names.empty() ? "" : ", ") + std::string(toString(c));
    }
    return keyError(key, "\"" + *v + "\" is not one of " + names);
  };
}

// A key podshaper no longer reads: an error that names what replaced it.
Handler replaced(const std::string& key) {
  return [key](const YAML::Node&) -> Result<void> {
    return keyError(key, "replaced by defaults.ncclCommunicators and ncclShmPerCommunicator (net, p2p, shm): "
                         "NCCL's /dev/shm is per rank per communicator, by transport (docs/webhook.md)");
  };
}

// A Kubernetes object name of the DNS subdomain kind (RFC 1123): lower-case letters,
// digits, '-' and '.', starting and ending with a letter or digit, at most 253.
bool isDnsSubdomain(const std::string& s) {
  if (s.empty() || s.size() > 253) return false;
  auto alnum = [](char c) { return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9'); };
  if (!alnum(s.front()) || !alnum(s.back())) return false;
  for (char c : s) {
    if (!alnum(c) && c != '-' && c != '.') return false;
  }
  return true;
}

// A DeviceClass's name.
Handler setDeviceClass(std::string& field, const std::string& key, std::string_view example) {
  return [&field, key, example](const YAML::Node& n) -> Result<void> {
    auto v = scalar(n, key);
    if (!v) return v.error();
    if (!isDnsSubdomain(*v)) {
      return keyError(key, "\"" + *v + "\" is not a DeviceClass name (a DNS subdomain, e.g. " + std::string(example) + ")");
    }
    field = *v;
    return {};
  };
}

}  // namespace

std::string_view toString(PartialNodePolicy p) {
  switch (p) {
    case PartialNodePolicy::kDeny: return "deny";
    case PartialNodePolicy::kWarn: return "warn";
    case PartialNodePolicy::kExpand: return "expand";
  }
  return "deny";
}

std::string_view toString(PodSecurityAction p) {
  return p == PodSecurityAction::kWarn ? "warn" : "deny";
}

std::string_view toString(NvlinkPlacement p) { return p == NvlinkPlacement::kPreferred ? "preferred" : "required"; }

std::string_view toString(MissingChannelAction a) { return a == MissingChannelAction::kWarn ? "warn" : "deny"; }

namespace {

// FNV-1a over text fed in pieces: stable across builds and platforms, unlike std::hash,
// and written without building the text (it is hashed on every admission).
struct Fnv1a {
  uint64_t h = 14695981039346656037ULL;
  Fnv1a& operator<<(std::string_view text) {
    for (unsigned char c : text) {
      h ^= c;
      h *= 1099511628211ULL;
    }
    return *this;
  }
  template <typename Number>
    requires std::is_integral_v<Number>
  Fnv1a& operator<<(Number n) {  // as std::to_string writes it
    char digits[24];
    auto end = std::to_chars(digits, digits + sizeof digits, n).ptr;
    return *this << std::string_view(digits, static_cast<std::size_t>(end - digits));
  }
};

}  // namespace

const char* toString(ShmSizing sizing) {
  switch (sizing) {
    case ShmSizing::kFormula: return "formula";
    case ShmSizing::kMeasured: return "measured";
    case ShmSizing::kRecommend: return "recommend";
  }
  return "measured";
}

std::optional<ShmSizing> parseShmSizing(std::string_view text) {
  for (ShmSizing sizing : {ShmSizing::kFormula, ShmSizing::kMeasured, ShmSizing::kRecommend}) {
    if (text == toString(sizing)) return sizing;
  }
  return std::nullopt;
}

std::string Config::hash() const {
  const PodDefaults& d = podDefaults;
  const NcclShmCosts& nccl = shm.ncclShmPerCommunicator;
  Fnv1a f;
  f << "workers=" << d.workers << ";prefetchFactor=" << d.prefetchFactor
    << ";headroomPercent=" << shm.headroomPercent << ";ncclCommunicators=" << d.ncclCommunicators
    << ";ncclShmPerCommunicator=net:" << nccl.net << ",p2p:" << nccl.p2p << ",shm:" << nccl.shm
    << ";gpusPerNode=" << node.gpusPerNode << ";nodeMemory=";
  if (node.nodeMemory) f << *node.nodeMemory;
  f << ";maxShmPercentOfNodeMemory=" << shm.maxShmPercentOfNodeMemory
    << ";partialNode=" << toString(node.partialNode) << ";podSecurity=" << toString(podSecurity)
    << ";memlock=" << node.memlock.text();
  // Settings added since keep the hash of a config that leaves them at their default.
  if (gpuDeviceClass != kDefaultGpuDeviceClass) f << ";gpuDeviceClass=" << gpuDeviceClass;
  if (shm.adoptOwnVolume) f << ";shm.adoptOwnVolume=true";
  if (shm.sizing != ShmSizing::kMeasured) f << ";shm.sizing=" << toString(shm.sizing);
  if (mnnvl.placement != NvlinkPlacement::kRequired) f << ";mnnvl.placement=" << toString(mnnvl.placement);
  if (mnnvl.missingChannel != MissingChannelAction::kDeny) {
    f << ";mnnvl.missingChannel=" << toString(mnnvl.missingChannel);
  }
  if (mnnvl.computeDomainChannelClass != kDefaultChannelClass) {
    f << ";mnnvl.computeDomainChannelClass=" << mnnvl.computeDomainChannelClass;
  }
  char out[17];
  std::snprintf(out, sizeof out, "%016llx", static_cast<unsigned long long>(f.h));
  return out;
}

const std::string& ConfigHashMemo::of(const Config& config) {
  if (last_ != config) {
    hash_ = config.hash();
    last_ = config;
  }
  return hash_;
}

Result<Config> parseConfig(std::string_view yamlText) {
  Config config;
  YAML::Node root;
  try {
    root = YAML::Load(std::string(yamlText));
  } catch (const YAML::Exception& e) {
    return makeError(std::string("config: not valid YAML: ") + e.what());
  }
  if (root.IsNull()) return config;  // an empty file means all defaults

  std::map<std::string, Handler> defaults{
      {"workers", setCount(config.podDefaults.workers, "defaults.workers", 0, 1024)},
      {"prefetchFactor", setCount(config.podDefaults.prefetchFactor, "defaults.prefetchFactor", 1, 1024)},
      {"headroomPercent", setCount(config.shm.headroomPercent, "defaults.headroomPercent", 0, 1000)},
      {"ncclCommunicators", setCount(config.podDefaults.ncclCommunicators, "defaults.ncclCommunicators", 0, 1024)},
      {"ncclShmReservePerRankWithP2P", replaced("defaults.ncclShmReservePerRankWithP2P")},
      {"ncclShmReservePerRank", replaced("defaults.ncclShmReservePerRank")},
      {"gpusPerNode", setCount(config.node.gpusPerNode, "defaults.gpusPerNode", 1, 1024)},
      {"nodeMemory", setQuantity(config.node.nodeMemory, "defaults.nodeMemory")},
  };
  std::map<std::string, Handler> ncclCosts{
      {"net", setQuantity(config.shm.ncclShmPerCommunicator.net, "ncclShmPerCommunicator.net")},
      {"p2p", setQuantity(config.shm.ncclShmPerCommunicator.p2p, "ncclShmPerCommunicator.p2p")},
      {"shm", setQuantity(config.shm.ncclShmPerCommunicator.shm, "ncclShmPerCommunicator.shm")},
  };
  std::map<std::string, Handler> limits{
      {"maxShmPercentOfNodeMemory",
       setCount(config.shm.maxShmPercentOfNodeMemory, "limits.maxShmPercentOfNodeMemory", 1, 100)},
  };
  std::map<std::string, Handler> shmKeys{
      {"adoptOwnVolume", setBool(config.shm.adoptOwnVolume, "shm.adoptOwnVolume")},
      {"sizing",
       [&](const YAML::Node& n) -> Result<void> {
         auto v = scalar(n, "shm.sizing");
         if (!v) return v.error();
         auto sizing = parseShmSizing(*v);
         if (!sizing) return keyError("shm.sizing", "\"" + *v + "\" is not one of formula, measured, recommend");
         config.shm.sizing = *sizing;
         return {};
       }},
  };
  std::map<std::string, Handler> mnnvlKeys{
      {"placement", setOneOf(config.mnnvl.placement, "mnnvl.placement",
                             {NvlinkPlacement::kRequired, NvlinkPlacement::kPreferred})},
      {"missingChannel", setOneOf(config.mnnvl.missingChannel, "mnnvl.missingChannel",
                                  {MissingChannelAction::kDeny, MissingChannelAction::kWarn})},
      {"computeDomainChannelClass", setDeviceClass(config.mnnvl.computeDomainChannelClass,
                                                   "mnnvl.computeDomainChannelClass", kDefaultChannelClass)},
  };
  std::map<std::string, Handler> top{
      {"shm", [&](const YAML::Node& n) { return forEachKey(n, "shm", shmKeys); }},
      {"defaults", [&](const YAML::Node& n) { return forEachKey(n, "defaults", defaults); }},
      {"limits", [&](const YAML::Node& n) { return forEachKey(n, "limits", limits); }},
      {"ncclShmPerCommunicator",
       [&](const YAML::Node& n) { return forEachKey(n, "ncclShmPerCommunicator", ncclCosts); }},
      {"partialNode",
       setOneOf(config.node.partialNode, "partialNode",
                {PartialNodePolicy::kDeny, PartialNodePolicy::kWarn, PartialNodePolicy::kExpand})},
      {"podSecurity", setOneOf(config.podSecurity, "podSecurity", {PodSecurityAction::kDeny, PodSecurityAction::kWarn})},
      {"gpuDeviceClass", setDeviceClass(config.gpuDeviceClass, "gpuDeviceClass", kDefaultGpuDeviceClass)},
      {"mnnvl", [&](const YAML::Node& n) { return forEachKey(n, "mnnvl", mnnvlKeys); }},
      {"memlock",
       [&](const YAML::Node& n) -> Result<void> {
         auto v = scalar(n, "memlock");
         if (!v) return v.error();
         auto limit = parseMemlockLimit(*v);
         if (!limit) return keyError("memlock", limit.error().message);
         config.node.memlock = *limit;
         return {};
       }},
  };
  try {
    auto r = forEachKey(root, "", top);
    if (!r) return r.error();
  } catch (const YAML::Exception& e) {
    return makeError(std::string("config: ") + e.what());
  }
  // A channel counted as GPUs, or GPUs taken for a channel, would size and check nothing right.
  if (config.mnnvl.computeDomainChannelClass == config.gpuDeviceClass) {
    return keyError("mnnvl.computeDomainChannelClass",
                    "\"" + config.gpuDeviceClass + "\" is gpuDeviceClass too: a ComputeDomain's IMEX channel is not a GPU");
  }
  return config;
}

}  // namespace podshaper
