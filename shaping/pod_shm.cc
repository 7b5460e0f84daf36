#include "shaping/pod_shm.h"

#include <algorithm>
#include <optional>

#include "api/names.h"
#include "base/checked.h"
#include "base/json_util.h"
#include "base/quantity.h"
#include "base/text.h"
#include "shaping/nccl.h"

namespace podshaper {

using json = nlohmann::json;

uint64_t shareOf(uint64_t bytes, uint64_t gpus, uint64_t of) {
  return ceilMiB(mulDivCeil(bytes, gpus, of).value_or(bytes)) * kMiB;
}

std::optional<std::string> OwnShm::size() const {
  if (adopted) return formatBytes(static_cast<int64_t>(needBytes));
  return volume.sizeAnnotation();
}

namespace {

// limits.maxShmPercentOfNodeMemory: a /dev/shm that would take too much of the node is
// an error; a node class without memory is a warning, returned.
Result<std::optional<std::string>> checkShmCap(const ShmPlan& plan, const NodeClass& nodeClass, uint64_t maxPercent,
                                               bool measured) {
  if (!nodeClass.memoryBytes) {
    return std::optional<std::string>(
        "node memory unknown: the /dev/shm cap (limits.maxShmPercentOfNodeMemory) was not checked");
  }
  auto cap = checkedMul(static_cast<uint64_t>(*nodeClass.memoryBytes), maxPercent);
  if (cap && plan.shmBytes > *cap / 100) {
    return makeError("/dev/shm would be " + formatBytes(static_cast<int64_t>(plan.shmBytes)) +
                     ", above limits.maxShmPercentOfNodeMemory (" + std::to_string(maxPercent) +
                     "%) of the node's " + formatBytes(*nodeClass.memoryBytes) +
                     (measured ? ": the workload's measured runs used that much; make its runs hold less in /dev/shm, "
                                 "or set " + std::string(names::kShmSizing) + ": formula and size it by its annotations"
                               : ": lower " + std::string(names::kWorkers) + ", " + std::string(names::kPrefetchFactor) +
                                     ", the batch size or " + std::string(names::kNcclCommunicators)) +
                     " (" + plan.formula + ")");
  }
  return std::optional<std::string>();
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

// Whether only GPU containers mount the volume, and only at /dev/shm: one that a sidecar or
// an init container also uses is the user's to size.
bool onlyGpuShm(const json& pod, const std::string& name, const PodInputs& in) {
  const json& spec = member(pod, "spec");
  for (const char* list : {"containers", "initContainers", "ephemeralContainers"}) {
    const json& containers = member(spec, list);
    if (!containers.is_array()) continue;
    for (std::size_t i = 0; i < containers.size(); ++i) {
      const json& mounts = member(containers[i], "volumeMounts");
      if (!mounts.is_array()) continue;
      for (const json& m : mounts) {
        if (!hasText(member(m, "name"), name)) continue;
        const bool gpu = std::string_view(list) == "containers" &&
                         std::any_of(in.gpuContainers.begin(), in.gpuContainers.end(),
                                     [&](const GpuContainer& c) { return c.index == i; });
        const json& path = member(m, "mountPath");
        if (!gpu || !path.is_string() || cleanPath(path.get_ref<const std::string&>()) != names::kShmMountPath) {
          return false;
        }
      }
    }
  }
  return true;
}

std::string containersWords(const OwnShm& own) {
  std::vector<std::string> quoted;
  for (const GpuContainer* c : own.containers) quoted.push_back(inQuotes(c->name));
  std::string out = quoted.size() == 1 ? "container " : "containers ";
  for (std::size_t i = 0; i < quoted.size(); ++i) {
    out += (i == 0 ? "" : i + 1 == quoted.size() ? " and " : ", ") + quoted[i];
  }
  return out;
}

// A container's memory limit, if it has one podshaper can read.
std::optional<int64_t> memoryLimit(const json& pod, const GpuContainer& c) {
  const json& containers = member(member(pod, "spec"), "containers");
  if (!containers.is_array() || c.index >= containers.size()) return std::nullopt;
  const json& memory = member(member(member(containers[c.index], "resources"), "limits"), "memory");
  if (!memory.is_string() && !memory.is_number()) return std::nullopt;
  auto bytes = parseQuantity(memory.is_string() ? memory.get<std::string>() : memory.dump());
  if (!bytes) return std::nullopt;
  return *bytes;
}

// The user's /dev/shm volumes of the pod's GPU containers, in the order they are first mounted.
std::vector<OwnShm> ownShmVolumes(const json& pod, const PodInputs& in, const ShmPlan& plan, bool adopt) {
  std::vector<OwnShm> out;
  for (const GpuContainer& c : in.gpuContainers) {
    if (!c.ownShmVolume) continue;
    auto it = std::find_if(out.begin(), out.end(), [&](const OwnShm& o) { return o.volume.name == *c.ownShmVolume; });
    if (it == out.end()) {
      out.push_back(OwnShm{shmVolumeInfo(pod, *c.ownShmVolume), {}, 0, 0, false});
      it = out.end() - 1;
    }
    it->containers.push_back(&c);
    it->gpus += c.gpus;
  }
  for (OwnShm& own : out) {
    own.needBytes = own.gpus == in.podGpus ? plan.shmBytes
                                           : std::max(kMinShmBytes, shareOf(plan.shmBytes, own.gpus, in.podGpus));
    // Never lowered: only a memory-backed emptyDir without a sizeLimit, or with one below
    // the need, and only one that no other container (or path) shares.
    own.adopted = adopt && own.volume.kind == ShmVolumeInfo::Kind::kMemory &&
                  (!own.volume.sizeLimit ||
                   (own.volume.sizeBytes && static_cast<uint64_t>(*own.volume.sizeBytes) < own.needBytes)) &&
                  onlyGpuShm(pod, own.volume.name, in);
  }
  return out;
}

}  // namespace

Result<PodShm, Denial> decidePodShm(const json& pod, const PodInputs& in, uint64_t ranks, const NodeClass& nodeClass,
                                    const ShmSettings& settings, std::string_view nvlinkDomain,
                                    const MeasuredShm* measured) {
  // The settings are read here, once; the formula and the NCCL reserve get plain numbers.
  const uint64_t maxPercent = settings.maxShmPercentOfNodeMemory;
  const bool adopt = settings.adoptOwnVolume;
  ShmInputs shmIn{ranks, in.workers, in.prefetchFactor, in.batch, settings.headroomPercent, {}};
  // NCCL's segments per rank per communicator, by the transport the ranks will use:
  // docs/webhook.md "The NCCL reserve".
  shmIn.nccl = planNcclReserve(NcclReserveInputs{ranks, in.ncclCommunicators, in.ncclCommunicatorsFrom, in.span,
                                                 nodeClass.p2pAllPairs, settings.ncclShmPerCommunicator, in.ncclEnv,
                                                 std::string(nvlinkDomain)});
  auto plan = planShm(shmIn, in.ranks ? std::string(names::kRanksPerPod) : "the pod's " + in.gpuWords);
  if (!plan) return makeDenial(DenialCause::kShmSize, plan.error().message);
  std::vector<std::string> measuredWarnings;
  if (measured != nullptr) measuredWarnings = applyMeasured(*plan, *measured, ranks);
  // A pod denied below has its own volumes read for nothing: they are few, and read without error.
  PodShm out{*plan, shmVolumeFor(in, *plan), ownShmVolumes(pod, in, *plan, adopt), std::move(measuredWarnings)};
  auto capped = checkShmCap(out.plan, nodeClass, maxPercent,
                            measured != nullptr && measured->sizing == ShmSizing::kMeasured);
  if (!capped) return makeDenial(DenialCause::kShmCap, capped.error().message);
  if (*capped) out.warnings.push_back(std::move(**capped));
  if (out.volume.gpus > 0 && volumeNamed(pod, names::kShmVolume)) {
    return makeDenial(DenialCause::kVolumeName, "spec.volumes has a volume named \"" + std::string(names::kShmVolume) +
                                                    "\", the name of the /dev/shm volume podshaper adds: rename it");
  }
  return out;
}

std::optional<std::string> ownShmWarning(const json& pod, const OwnShm& own) {
  using Kind = ShmVolumeInfo::Kind;
  const ShmVolumeInfo& v = own.volume;
  const std::string need = formatBytes(static_cast<int64_t>(own.needBytes));
  const std::string who = containersWords(own);
  const std::string keeps =
      who + (own.containers.size() == 1 ? " keeps its own /dev/shm, " : " keep their own /dev/shm, ") + v.words();
  const std::string theirRanks = own.containers.size() == 1 ? "its ranks" : "their ranks";
  const std::string orDrop = "or drop the /dev/shm mount and podshaper mounts a /dev/shm of " + need +
                             " and raises the memory for it";
  if (own.adopted) {
    return who + ": the pod's own /dev/shm, " + v.words() + ", adopted (config shm.adoptOwnVolume): " +
           "sizeLimit set to " + need + ", what " + theirRanks + " need, and the memory raised for it";
  }
  switch (v.kind) {
    case Kind::kMemory:
      if (!v.sizeLimit) {
        // The kubelet sizes such a volume to the pod's memory limit, and its pages count
        // against the limit of the container that writes them.
        const bool one = own.containers.size() == 1;
        std::string taken = one ? "" : theirRanks + " need " + need + " there; ";
        for (std::size_t i = 0; i < own.containers.size(); ++i) {
          const GpuContainer& c = *own.containers[i];
          const uint64_t share = one ? own.needBytes : shareOf(own.needBytes, c.gpus, own.gpus);
          const std::string shareText = formatBytes(static_cast<int64_t>(share));
          const std::string what = one ? "the " + shareText + " its ranks need"
                                       : "the " + shareText + " of container " + inQuotes(c.name);
          auto limit = memoryLimit(pod, c);
          taken += i == 0 ? "" : "; ";
          if (!limit) {
            taken += what + " would come from the node's memory: " + (one ? "the container" : inQuotes(c.name)) +
                     " has no memory limit";
          } else if (share >= static_cast<uint64_t>(*limit)) {
            taken += what + " would take more than the container's " + formatBytes(*limit) +
                     " memory limit, which podshaper did not raise: it would be OOM-killed";
          } else {
            taken += what + " would take " + shareText + " of the container's " + formatBytes(*limit) +
                     " memory limit, which podshaper did not raise";
          }
        }
        return keeps + ": " + taken + "; give the volume a sizeLimit of at least " + need +
               " and the memory for it, " + orDrop;
      } else if (v.sizeBytes && static_cast<uint64_t>(*v.sizeBytes) < own.needBytes) {
        return keeps + ", smaller than the " + need + " " + theirRanks +
               " need: DataLoader workers may die with a bus error and NCCL fail to make its segments; "
               "raise the volume's sizeLimit to at least " + need + ", " + orDrop;
      }
      return std::nullopt;
    case Kind::kDisk:
      return keeps + ": DataLoader batches and NCCL's segments go through the node's disk, slower than memory" +
             (v.sizeBytes && static_cast<uint64_t>(*v.sizeBytes) < own.needBytes
                  ? ", and its sizeLimit is below the " + need + " " + theirRanks + " need"
                  : std::string()) +
             "; set medium: Memory with a sizeLimit of at least " + need + ", " + orDrop;
    case Kind::kHostPath:
      return keeps + ": shared with every pod on the node that mounts it, not counted against the pod's memory, and "
             "not cleared when the pod ends (a crashed run's segments stay); podshaper cannot size it: the " + need + " " +
             theirRanks + " need must be free there, " + orDrop;
    case Kind::kOther:
      return keeps + ", not a memory-backed emptyDir: podshaper cannot size it, and the " + need + " " + theirRanks +
             " need must fit there; " + orDrop;
    case Kind::kMissing: return std::nullopt;  // the API server refuses a mount of no volume
  }
  return std::nullopt;
}

std::string ownShmWords(const OwnShm& own, const PodInputs& in) {
  std::string out = own.gpus == in.podGpus ? std::string()
                                           : containersWords(own) + " (" + counted(own.gpus, "GPU") + ", " +
                                                 formatBytes(static_cast<int64_t>(own.needBytes)) + " of the need): ";
  out += "/dev/shm is the pod's own ";
  out += own.volume.words();
  out += own.adopted ? ", adopted: sizeLimit set to " + formatBytes(static_cast<int64_t>(own.needBytes)) +
                           " (config shm.adoptOwnVolume)"
                     : std::string(", kept as written");
  return out;
}

}  // namespace podshaper
