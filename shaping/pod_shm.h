#pragma once

// A pod's /dev/shm (docs/webhook.md: the formula, "The NCCL reserve"): the size from its
// inputs with NCCL's reserve, the cap against the node's memory, and how it is shared
// between the GPU containers that mount podshaper's volume and those that keep their own.
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "api/shm_volume.h"
#include "base/result.h"
#include "shaping/config.h"
#include "shaping/denial.h"
#include "shaping/measured_shm.h"
#include "shaping/node_class.h"
#include "shaping/pod_inputs.h"
#include "shaping/shm.h"

namespace podshaper {

// A container's share of `bytes`, by its GPUs out of `of`, in whole MiB.
uint64_t shareOf(uint64_t bytes, uint64_t gpus, uint64_t of);

// podshaper's /dev/shm volume: the GPUs of the containers that mount it, and its size:
// the pod's when every GPU container does, else their share of it (partial).
struct ShmVolume {
  uint64_t bytes = 0, gpus = 0;
  bool partial = false;
};

// A volume of the user's at /dev/shm and the GPU containers that mount it there: kept as
// written, or adopted (config shm.adoptOwnVolume). docs/webhook.md "A /dev/shm of the user's".
struct OwnShm {
  ShmVolumeInfo volume;  // as the user wrote it
  std::vector<const GpuContainer*> containers;
  uint64_t gpus = 0;       // theirs
  uint64_t needBytes = 0;  // their share of the pod's /dev/shm, in whole MiB, at least 64Mi
  // Adopted: its sizeLimit becomes needBytes and its containers' memory is raised for it.
  bool adopted = false;
  // The /dev/shm its containers will have: the sizeLimit set or kept, if it has one.
  std::optional<std::string> size() const;
};

// The pod's /dev/shm: its size for `ranks` ranks with the NCCL reserve of the transport
// its ranks will use on the nodes of its class (docs/webhook.md "The NCCL reserve"), the
// cap against the node's memory, podshaper's volume and the user's own volumes.
struct PodShm {
  ShmPlan plan;
  ShmVolume volume;
  std::vector<OwnShm> owns;  // in the order the GPU containers first mount them
  std::vector<std::string> warnings;
};
// Denied: a size that cannot be computed (shm-size), above limits.maxShmPercentOfNodeMemory
// (shm-cap; a node class without memory is a warning), or a volume of the user's with the
// name of podshaper's (volume-name).
// `nvlinkDomain`: the NVLink domain the job's ranks are all kept within, in words (empty:
// they may leave it; shaping/nvlink.h). With `measured`, the workload's ShmProfile sizes it
// or is told beside the formula (shaping/measured_shm.h).
Result<PodShm, Denial> decidePodShm(const nlohmann::json& pod, const PodInputs& in, uint64_t ranks,
                                    const NodeClass& nodeClass, const ShmSettings& settings,
                                    std::string_view nvlinkDomain = {}, const MeasuredShm* measured = nullptr);

// What a kept volume earns: too small, no sizeLimit, the host's, on disk; or adopted.
std::optional<std::string> ownShmWarning(const nlohmann::json& pod, const OwnShm& own);

// The volume in the shm-formula annotation: "/dev/shm is the pod's own emptyDir ..., kept as written".
std::string ownShmWords(const OwnShm& own, const PodInputs& in);

}  // namespace podshaper
