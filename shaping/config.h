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
// How /dev/shm is sized (docs/webhook.md "Sizing from measured use"): by the formula alone;
// from the workload's ShmProfile where it has one (the formula's result shown beside it);
// or by the formula with the profile's size in the warnings.
enum class ShmSizing { kFormula, kMeasured, kRecommend };
const char* toString(ShmSizing sizing);  // "formula", "measured", "recommend"
std::optional<ShmSizing> parseShmSizing(std::string_view text);

inline constexpr std::string_view kDefaultGpuDeviceClass = "gpu.nvidia.com";

// How a node-exclusive pod's job is kept in one multi-node NVLink domain: a required
// podAffinity, or a preferred one (its ranks may then leave the domain: the NET reserve).
enum class NvlinkPlacement { kRequired, kPreferred };
// What to do with a pod that would fail NCCL's init for want of an IMEX channel.
enum class MissingChannelAction { kDeny, kWarn };
// The DeviceClass of a ComputeDomain's IMEX channel (NVIDIA's DRA driver).
inline constexpr std::string_view kDefaultChannelClass = "compute-domain-default-channel.nvidia.com";

// Each step of shapePod takes only the part of the config it reads. The parts follow the
// steps; the YAML keys they come from are named beside each field (README "Config").

// What a pod gets where its annotations say nothing (pod_inputs).
struct PodDefaults {
  uint64_t workers = 4;         // defaults.workers
  uint64_t prefetchFactor = 2;  // defaults.prefetchFactor
  // defaults.ncclCommunicators: NCCL communicators (process groups) each rank makes, where
  // the pod does not say (podshaper.io/nccl-communicators): 4 covers a DP × TP mesh (3) and one more.
  uint64_t ncclCommunicators = 4;
  bool operator==(const PodDefaults&) const = default;
};

// How a pod's /dev/shm is sized, capped and mounted (pod_shm).
struct ShmSettings {
  uint64_t headroomPercent = 20;  // defaults.headroomPercent
  // ncclShmPerCommunicator: /dev/shm NCCL keeps per rank per communicator, by transport: docs/webhook.md.
  NcclShmCosts ncclShmPerCommunicator;
  uint64_t maxShmPercentOfNodeMemory = 50;  // limits.maxShmPercentOfNodeMemory
  // shm.adoptOwnVolume: a GPU container's own memory-backed emptyDir at /dev/shm with no
  // sizeLimit, or one below the need, gets the need as its sizeLimit and the memory for it
  // (docs/webhook.md "A /dev/shm of the user's"). Off: a user's volume is kept as written.
  bool adoptOwnVolume = false;
  // shm.sizing: the default of a pod without podshaper.io/shm-sizing.
  ShmSizing sizing = ShmSizing::kMeasured;
  bool operator==(const ShmSettings&) const = default;
};

// The nodes a GPU pod is sized for and placed on (node_class, placement, memlock).
struct NodeSettings {
  uint64_t gpusPerNode = 8;  // defaults.gpusPerNode
  // defaults.nodeMemory: memory of a GPU node when the cluster does not say (no --kubeconfig,
  // or no matching Node); unset means the shm cap is checked only against known nodes.
  std::optional<int64_t> nodeMemory;
  PartialNodePolicy partialNode = PartialNodePolicy::kDeny;  // partialNode
  // memlock: RLIMIT_MEMLOCK asked for every GPU container (the NRI annotation's soft and
  // hard), and what the node affinity requires a node to grant.
  MemlockLimit memlock;
  bool operator==(const NodeSettings&) const = default;
};

// Pods whose nodes are in multi-node NVLink domains (docs/webhook.md "Multi-node NVLink").
struct MnnvlSettings {
  NvlinkPlacement placement = NvlinkPlacement::kRequired;          // mnnvl.placement
  MissingChannelAction missingChannel = MissingChannelAction::kDeny;  // mnnvl.missingChannel
  std::string computeDomainChannelClass = std::string(kDefaultChannelClass);  // mnnvl.computeDomainChannelClass
  bool operator==(const MnnvlSettings&) const = default;
};

// The webhook's configuration file (YAML). Every key is optional; see README "Config".
struct Config {
  PodDefaults podDefaults;
  ShmSettings shm;
  NodeSettings node;
  PodSecurityAction podSecurity = PodSecurityAction::kDeny;  // podSecurity (privileges)
  // gpuDeviceClass: the DeviceClass whose devices are GPUs, for pods that ask GPUs through
  // resource claims (Dynamic Resource Allocation); NVIDIA's DRA driver names it gpu.nvidia.com.
  std::string gpuDeviceClass = std::string(kDefaultGpuDeviceClass);
  MnnvlSettings mnnvl;  // mnnvl

  // Stable hash of the effective settings, shown in podshaper.io/shaped-by.
  std::string hash() const;
  bool operator==(const Config&) const = default;
};

// The hash of the config last hashed: a webhook thread's every admission hashes the same
// config, and comparing it costs less than hashing it.
class ConfigHashMemo {
 public:
  const std::string& of(const Config& config);

 private:
  std::optional<Config> last_;
  std::string hash_;
};

// Parses the YAML text. Unknown keys are errors (a typo must not silently
// fall back to a default); messages name the key: "config: defaults.workers: ...".
Result<Config> parseConfig(std::string_view yamlText);

std::string_view toString(PartialNodePolicy p);
std::string_view toString(PodSecurityAction p);
std::string_view toString(NvlinkPlacement p);       // "required", "preferred"
std::string_view toString(MissingChannelAction a);  // "deny", "warn"

}  // namespace podshaper
