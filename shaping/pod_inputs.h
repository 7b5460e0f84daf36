#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "base/result.h"
#include "shaping/config.h"
#include "shaping/nccl.h"
#include "shaping/pod_claims.h"
#include "shaping/shm.h"

namespace podshaper {

// A container that requests GPUs.
struct GpuContainer {
  std::size_t index = 0;  // in spec.containers
  std::string name;
  uint64_t gpus = 0;        // nvidia.com/gpu plus the exact counts of the claims it uses
  bool allGpus = false;     // it uses a claim request of allocationMode All: every GPU of the node
  std::optional<std::string> ownShmVolume;  // the user's own volume at /dev/shm
  // securityContext.runAsUser and runAsNonRoot, the container's else the pod's.
  std::optional<int64_t> runAsUser;
  bool runAsNonRoot = false;
};

// Everything shaping needs, read from the pod and defaulted from config (its PodDefaults).
struct PodInputs {
  std::vector<GpuContainer> gpuContainers;
  uint64_t podGpus = 0;  // with allGpus: 0 until the node class says G
  // A DRA request of allocationMode All: the pod gets every GPU of its node.
  bool allGpus = false;
  // Some GPUs come from resource claims: config partialNode: expand cannot raise them.
  bool gpusFromClaims = false;
  std::string gpuWords;  // how the pod asks its GPUs, for messages: "nvidia.com/gpu" or "GPUs"
  uint64_t workers = 0;
  uint64_t prefetchFactor = 0;
  std::optional<uint64_t> ranks;  // unset: the pod's GPUs (after any expansion)
  uint64_t ncclCommunicators = 0;
  std::string ncclCommunicatorsFrom;  // the annotation, or the config key it defaulted to
  JobSpan span;                       // whether the ranks talk to other nodes' ranks
  NcclEnv ncclEnv;                    // NCCL's switches in the GPU containers' env
  BatchSize batch;
  bool nodeExclusive = true;
  std::optional<uint64_t> requestedNodeGpus;  // the pod's nodeSelector podshaper.io/gpu-count
  std::vector<std::string> warnings;          // what was defaulted
};

// Reads the pod; `claims` are the GPUs of its resource claims (readPodClaimGpus). An
// error message names the annotation or field and says what to change.
Result<PodInputs> readPodInputs(const nlohmann::json& pod, const PodDefaults& defaults, const PodClaimGpus& claims = {});

}  // namespace podshaper
