#pragma once

// A container's /dev/shm as the pod has it: podshaper's volume or one of the user's, its
// kind and its size, in the words every output uses (the shm-formula annotation, the
// admission warnings, the ShmExhausted Event). docs/webhook.md "A /dev/shm of the user's".
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

namespace podshaper {

struct ShmVolumeInfo {
  enum class Kind {
    kMemory,    // emptyDir, medium Memory: tmpfs, its pages count against the pod's memory
    kDisk,      // emptyDir of another medium: on the node's disk
    kHostPath,  // the host's directory, shared with every pod that mounts it
    kOther,     // any other volume kind (a PVC, an image, ...)
    kMissing,   // no volume of that name in spec.volumes
  };
  std::string name;
  Kind kind = Kind::kMissing;
  std::size_t index = 0;                 // in spec.volumes (not kMissing)
  std::optional<std::string> sizeLimit;  // an emptyDir's, as written
  std::optional<int64_t> sizeBytes;      // sizeLimit read as a quantity
  std::string source;                    // hostPath: its path; kOther: the kind's key

  // "emptyDir \"dshm\" (medium Memory, sizeLimit 250Gi)", "hostPath \"dshm\" (the host's
  // /dev/shm)", "emptyDir \"dshm\" (medium Memory, no sizeLimit: up to the pod's memory limit)".
  std::string words() const;
  // podshaper.io/shm-size for it: the sizeLimit as written, for an emptyDir that has one.
  std::optional<std::string> sizeAnnotation() const;
  bool isPodshapers() const;
};

// The name of the container's volume mounted at /dev/shm, the path compared as the
// runtime resolves it ("/dev//shm" and "/dev/shm/." are /dev/shm too).
std::optional<std::string> shmMountOf(const nlohmann::json& container);

// The pod's volume of that name, described.
ShmVolumeInfo shmVolumeInfo(const nlohmann::json& pod, std::string_view name);

// The /dev/shm volume of the pod's container of that name (containers, init containers),
// if it mounts one.
std::optional<ShmVolumeInfo> containerShmVolume(const nlohmann::json& pod, std::string_view container);

}  // namespace podshaper
