#include "shaping/pod_shm.h"

#include <algorithm>

#include "api/names.h"
#include "base/checked.h"
#include "base/json_util.h"
#include "base/quantity.h"
#include "shaping/nccl.h"

namespace podshaper {
namespace {

using json = nlohmann::json;

ShmInputs shmInputsFor(const PodInputs& in, uint64_t ranks, const NodeClass& nodeClass, const Config& config) {
  ShmInputs shmIn;
  shmIn.ranks = ranks;
  shmIn.workers = in.workers;
  shmIn.prefetchFactor = in.prefetchFactor;
  shmIn.batch = in.batch;
  shmIn.headroomPercent = config.headroomPercent;
  // NCCL's segments per rank per communicator, by the transport the ranks will use:
  // docs/webhook.md "The NCCL reserve".
  shmIn.nccl = planNcclReserve(NcclReserveInputs{ranks, in.ncclCommunicators, in.ncclCommunicatorsFrom, in.span,
                                                 nodeClass.p2pAllPairs, config.ncclShmPerCommunicator, in.ncclEnv});
  return shmIn;
}

}  // namespace

Result<ShmPlan> planPodShm(const PodInputs& in, uint64_t ranks, const NodeClass& nodeClass, const Config& config) {
  return planShm(shmInputsFor(in, ranks, nodeClass, config),
                 in.ranks ? std::string(names::kRanksPerPod) : "the pod's " + in.gpuWords);
}

Result<void> checkShmCap(const ShmPlan& plan, const NodeClass& nodeClass, const Config& config,
                         std::vector<std::string>& warnings) {
  if (!nodeClass.memoryBytes) {
    warnings.push_back("node memory unknown: the /dev/shm cap (limits.maxShmPercentOfNodeMemory) was not checked");
    return {};
  }
  auto cap = checkedMul(static_cast<uint64_t>(*nodeClass.memoryBytes), config.maxShmPercentOfNodeMemory);
  if (cap && plan.shmBytes > *cap / 100) {
    return makeError("/dev/shm would be " + formatBytes(static_cast<int64_t>(plan.shmBytes)) +
                     ", above limits.maxShmPercentOfNodeMemory (" + std::to_string(config.maxShmPercentOfNodeMemory) +
                     "%) of the node's " + formatBytes(*nodeClass.memoryBytes) + ": lower " + std::string(names::kWorkers) +
                     ", " + std::string(names::kPrefetchFactor) + ", the batch size or " + std::string(names::kNcclCommunicators) +
                     " (" + plan.formula + ")");
  }
  return {};
}

uint64_t shareOf(uint64_t bytes, uint64_t gpus, uint64_t of) {
  return ceilMiB(mulDivCeil(bytes, gpus, of).value_or(bytes)) * kMiB;
}

ShmVolume shmVolumeFor(const PodInputs& in, const ShmPlan& plan) {
  ShmVolume volume;
  for (const GpuContainer& c : in.gpuContainers) volume.gpus += c.ownShmVolume ? 0 : c.gpus;
  volume.partial = volume.gpus > 0 && volume.gpus < in.podGpus;
  volume.bytes = volume.partial ? std::max(kMinShmBytes, shareOf(plan.shmBytes, volume.gpus, in.podGpus))
                                : plan.shmBytes;
  return volume;
}

const json* volumeNamed(const json& pod, std::string_view name) {
  for (const json& v : member(member(pod, "spec"), "volumes")) {
    if (member(v, "name") == name) return &v;
  }
  return nullptr;
}

void checkOwnShm(const json& pod, const GpuContainer& c, uint64_t shareBytes, std::vector<std::string>& warnings) {
  if (const json* v = volumeNamed(pod, *c.ownShmVolume)) {
    const json& sizeLimit = member(member(*v, "emptyDir"), "sizeLimit");
    if (!sizeLimit.is_string()) return;
    auto limit = parseQuantity(sizeLimit.get_ref<const std::string&>());
    if (limit && static_cast<uint64_t>(*limit) < shareBytes) {
      warnings.push_back("container \"" + c.name + "\" keeps its own /dev/shm volume \"" +
                         *c.ownShmVolume + "\" of " + formatBytes(*limit) + ", smaller than the " +
                         formatBytes(static_cast<int64_t>(shareBytes)) +
                         " its ranks need; DataLoader workers may die with a bus error");
    }
  }
}

}  // namespace podshaper
