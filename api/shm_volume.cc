#include "api/shm_volume.h"

#include "api/names.h"
#include "base/json_util.h"
#include "base/quantity.h"
#include "base/text.h"

namespace podshaper {

using json = nlohmann::json;

std::string ShmVolumeInfo::words() const {
  const std::string quoted = inQuotes(name);
  const std::string limit = sizeLimit ? "sizeLimit " + *sizeLimit : "no sizeLimit";
  switch (kind) {
    case Kind::kMemory:
      return "emptyDir " + quoted + " (medium Memory, " +
             (sizeLimit ? limit : limit + ": up to the pod's memory limit") + ")";
    case Kind::kDisk:
      return "emptyDir " + quoted + " (on the node's disk, not in memory, " + limit + ")";
    case Kind::kHostPath:
      return "hostPath " + quoted + " (" +
             (cleanPath(source) == names::kShmMountPath ? std::string("the host's /dev/shm")
                                                        : "the host's directory " + inQuotes(source)) +
             ")";
    case Kind::kOther: return (source.empty() ? "" : source + " ") + "volume " + quoted;
    case Kind::kMissing: return "volume " + quoted + " (not in spec.volumes)";
  }
  return "volume " + quoted;
}

std::optional<std::string> ShmVolumeInfo::sizeAnnotation() const {
  if ((kind == Kind::kMemory || kind == Kind::kDisk) && sizeLimit && sizeBytes) return sizeLimit;
  return std::nullopt;
}

bool ShmVolumeInfo::isPodshapers() const { return name == names::kShmVolume; }

std::optional<std::string> shmMountOf(const json& container) {
  const json& mounts = member(container, "volumeMounts");
  if (!mounts.is_array()) return std::nullopt;
  for (const json& m : mounts) {
    const json& path = member(m, "mountPath");
    if (path.is_string() && cleanPath(path.get_ref<const std::string&>()) == names::kShmMountPath) {
      return stringMember(m, "name");
    }
  }
  return std::nullopt;
}

ShmVolumeInfo shmVolumeInfo(const json& pod, std::string_view name) {
  ShmVolumeInfo info;
  info.name = std::string(name);
  const json& volumes = member(member(pod, "spec"), "volumes");
  if (!volumes.is_array()) return info;
  for (std::size_t i = 0; i < volumes.size(); ++i) {
    const json& v = volumes[i];
    if (!hasText(member(v, "name"), name)) continue;
    info.index = i;
    if (const json& emptyDir = member(v, "emptyDir"); emptyDir.is_object()) {
      info.kind = hasText(member(emptyDir, "medium"), "Memory") ? ShmVolumeInfo::Kind::kMemory
                                                                 : ShmVolumeInfo::Kind::kDisk;
      const json& limit = member(emptyDir, "sizeLimit");
      if (limit.is_string() || limit.is_number()) {
        info.sizeLimit = limit.is_string() ? limit.get<std::string>() : limit.dump();
        if (auto bytes = parseQuantity(*info.sizeLimit)) info.sizeBytes = *bytes;
      }
    } else if (const json& hostPath = member(v, "hostPath"); hostPath.is_object()) {
      info.kind = ShmVolumeInfo::Kind::kHostPath;
      info.source = stringMember(hostPath, "path");
    } else {
      info.kind = ShmVolumeInfo::Kind::kOther;
      for (const auto& [key, _] : v.items()) {
        if (key != "name") {
          info.source = cutUtf8(key, 64);
          break;
        }
      }
    }
    return info;
  }
  return info;
}

std::optional<ShmVolumeInfo> containerShmVolume(const json& pod, std::string_view container) {
  for (const char* list : {"containers", "initContainers"}) {
    const json& containers = member(member(pod, "spec"), list);
    if (!containers.is_array()) continue;
    for (const json& c : containers) {
      if (!hasText(member(c, "name"), container)) continue;
      auto mount = shmMountOf(c);
      if (!mount) return std::nullopt;
      return shmVolumeInfo(pod, *mount);
    }
  }
  return std::nullopt;
}

}  // namespace podshaper
