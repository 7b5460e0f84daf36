#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "api/memlock.h"
#include "base/result.h"
#include "shaping/nccl.h"

namespace podshaper {

// What to do with a node-exclusive pod that asks for fewer GPUs than its node class has.
enum class PartialNodePolicy { kDeny, kWarn, kExpand };
// What to do when the pod's namespace enforces a Pod Security level that forbids
// hostIPC and IPC_LOCK.
enum class PodSecurityAction { kDeny, kWarn };

inline constexpr std::string_view kDefaultGpuDeviceClass = "gpu.nvidia.com";

// The webhook's configuration file (YAML). Every key is optional; see README "Config".
struct Config {
  uint64_t workers = 4;
  uint64_t prefetchFactor = 2;
  uint64_t headroomPercent = 20;
  // NCCL communicators (process groups) each rank makes, where the pod does not say
  // (podshaper.io/nccl-communicators): 4 covers a DP × TP mesh (3) and one more.
  uint64_t ncclCommunicators = 4;
  // /dev/shm NCCL keeps per rank per communicator, by transport: docs/webhook.md.
  NcclShmCosts ncclShmPerCommunicator;
  uint64_t gpusPerNode = 8;
  // Memory of a GPU node when the cluster does not say (no --kubeconfig, or no
  // matching Node); unset means the shm cap is checked only against known nodes.
  std::optional<int64_t> nodeMemory;
  uint64_t maxShmPercentOfNodeMemory = 50;
  PartialNodePolicy partialNode = PartialNodePolicy::kDeny;
  PodSecurityAction podSecurity = PodSecurityAction::kDeny;
  // RLIMIT_MEMLOCK asked for every GPU container (the NRI annotation's soft and
  // hard), and what the node affinity requires a node to grant.
  MemlockLimit memlock;
  // The DeviceClass whose devices are GPUs, for pods that ask GPUs through resource
  // claims (Dynamic Resource Allocation); NVIDIA's DRA driver names it gpu.nvidia.com.
  std::string gpuDeviceClass = std::string(kDefaultGpuDeviceClass);
  // shm.adoptOwnVolume: a GPU container's own memory-backed emptyDir at /dev/shm with no
  // sizeLimit, or one below the need, gets the need as its sizeLimit and the memory for it
  // (docs/webhook.md "A /dev/shm of the user's"). Off: a user's volume is kept as written.
  bool adoptOwnShmVolume = false;

  // Stable hash of the effective settings, shown in podshaper.io/shaped-by. The last
  // config hashed is remembered per thread: a webhook's every admission hashes the same one.
  std::string hash() const;
  bool operator==(const Config&) const = default;
};

// Parses the YAML text. Unknown keys are errors (a typo must not silently
// fall back to a default); messages name the key: "config: defaults.workers: ...".
Result<Config> parseConfig(std::string_view yamlText);

std::string_view toString(PartialNodePolicy p);
std::string_view toString(PodSecurityAction p);

}  // namespace podshaper
