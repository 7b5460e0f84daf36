// The node's multi-node NVLink domain, from its GPUs' fabric info (api/topology.h).
#include <algorithm>
#include <map>
#include <string>
#include <vector>

#include "api/topology.h"
#include "base/text.h"

namespace podshaper {
namespace {

// nvml.h's NVML_GPU_FABRIC_HEALTH_MASK_*: two-bit fields at these shifts, whose value 1 is
// "true" (the fault is there), 2 "false" and 0 "not supported".
struct TwoBitFault {
  unsigned shift;
  const char* words;
};
constexpr TwoBitFault kTwoBitFaults[] = {{0, "degraded bandwidth"},
                                         {2, "route recovery in progress"},
                                         {4, "route unhealthy"},
                                         {6, "access timeout recovery in progress"}};
// ...and a four-bit field at 8 (newer drivers): 0 not supported, 1 none, then what is wrong.
constexpr unsigned kIncorrectConfigurationShift = 8;
constexpr const char* kIncorrectConfigurations[] = {"incorrect system GUID", "incorrect chassis serial number",
                                                    "no partition", "too few NVLinks"};

bool zeroUuid(const std::string& uuid) { return uuid.find_first_not_of("0-") == std::string::npos; }

// "GPU0", "GPU0 and GPU2", "GPU0, GPU1 and GPU2"
std::string gpuList(const std::vector<int>& gpus) {
  std::string out;
  for (std::size_t i = 0; i < gpus.size(); ++i) {
    if (i > 0) out += i + 1 == gpus.size() ? " and " : ", ";
    appendAll(out, "GPU", gpus[i]);
  }
  return out;
}

// "GPU2 is", "GPU2 and GPU3 are"
std::string gpusAre(const std::vector<int>& gpus, const char* one, const char* many) {
  return gpuList(gpus) + (gpus.size() == 1 ? one : many);
}

}  // namespace

std::vector<std::string> fabricFaults(uint32_t healthMask) {
  std::vector<std::string> faults;
  for (const TwoBitFault& f : kTwoBitFaults) {
    if (((healthMask >> f.shift) & 3u) == 1u) faults.emplace_back(f.words);
  }
  const uint32_t config = (healthMask >> kIncorrectConfigurationShift) & 0xFu;
  if (config >= 2) {
    const std::size_t known = sizeof kIncorrectConfigurations / sizeof *kIncorrectConfigurations;
    faults.push_back("incorrect configuration (" +
                     (config - 2 < known ? std::string(kIncorrectConfigurations[config - 2])
                                         : "code " + std::to_string(config)) +
                     ")");
  }
  return faults;
}

std::string NvlinkDomain::name() const {
  return id.empty() ? "NVLink domain unknown (all-zero cluster UUID)" : "NVLink domain " + id;
}

std::string NvlinkDomain::sentence() const {
  std::string out = name() + ":";
  if (!id.empty()) {  // no GPUs are counted in a domain not known
    out += " ";
    if (gpus == nodeGpus) out += counted(static_cast<uint64_t>(gpus), "GPU");
    else appendAll(out, gpus, " of ", counted(static_cast<uint64_t>(nodeGpus), "GPU"));
    out += " here,";
  }
  out += " fabric " + state + ", ";
  if (!healthKnown) out += "health not reported";
  else if (healthy) out += "healthy";
  else out += "unhealthy (" + faults + ")";
  if (problem == Problem::kMixed) out += "; " + problemWords;
  return out;
}

std::optional<NvlinkDomain> nvlinkDomainOf(const Topology& t) {
  // Each GPU's domain, in the order first seen.
  std::vector<std::string> ids;
  std::map<std::string, std::vector<int>> members;
  std::vector<int> noFabric, zeroCompleted;
  for (const GpuInfo& gpu : t.gpus) {
    if (!gpu.fabric) {
      noFabric.push_back(gpu.index);
      continue;
    }
    if (zeroUuid(gpu.fabric->clusterUuid)) {
      // Before registration completes the UUID may be all zeros yet; after, it means no domain.
      if (gpu.fabric->state == "Completed") zeroCompleted.push_back(gpu.index);
      continue;
    }
    const std::string id = gpu.fabric->clusterUuid + "." + std::to_string(gpu.fabric->cliqueId);
    if (!members.contains(id)) ids.push_back(id);
    members[id].push_back(gpu.index);
  }
  NvlinkDomain d;
  d.nodeGpus = static_cast<int>(t.gpus.size());
  std::vector<std::string> outside;
  if (!ids.empty()) {
    d.id = ids.front();
    for (const std::string& other : ids) {
      if (members[other].size() > members[d.id].size()) d.id = other;
    }
    d.gpus = static_cast<int>(members[d.id].size());
    for (const std::string& other : ids) {
      if (other != d.id) outside.push_back(gpusAre(members[other], " is", " are") + " in NVLink domain " + other);
    }
    if (!noFabric.empty()) outside.push_back(gpuList(noFabric) + (noFabric.size() == 1 ? " reports" : " report") +
                                             " no fabric");
    if (!zeroCompleted.empty()) {
      outside.push_back(gpusAre(zeroCompleted, " is", " are") +
                        " in no multi-node NVLink domain (an all-zero cluster UUID)");
    }
  }

  // What the GPUs with fabric info say of their registration and health.
  std::vector<int> notStarted, inProgress, failed;
  std::vector<std::string> failedStatus, faults;  // faults: "GPU1: degraded bandwidth"
  for (const GpuInfo& gpu : t.gpus) {
    if (!gpu.fabric) continue;
    const GpuFabric& f = *gpu.fabric;
    if (f.state == "NotStarted") notStarted.push_back(gpu.index);
    else if (f.state != "Completed") inProgress.push_back(gpu.index);  // InProgress, or a state NVML added since
    else if (f.status != "Success") {
      failed.push_back(gpu.index);
      if (std::find(failedStatus.begin(), failedStatus.end(), f.status) == failedStatus.end()) {
        failedStatus.push_back(f.status);  // each status once
      }
    }
    if (f.healthMask && *f.healthMask != 0) {  // every field 0: nothing supported, nothing said
      d.healthKnown = true;
      auto named = fabricFaults(*f.healthMask);
      if (!named.empty()) faults.push_back("GPU" + std::to_string(gpu.index) + ": " + joined(named));
    }
  }
  d.completed = notStarted.empty() && inProgress.empty() && failed.empty();
  // A GPU still registering has an all-zero UUID until it completes (NVML's usual answer):
  // no domain known yet, but not one to validate as without a fabric. Completed with success
  // and all zeros is NVLink within the node: no domain.
  if (ids.empty() && d.completed) return std::nullopt;
  d.healthy = faults.empty();
  d.faults = joined(faults, "; ");
  d.state = !notStarted.empty() ? "not started" : !inProgress.empty() ? "in progress" : !failed.empty() ? "failed"
                                                                                                          : "completed";
  const std::string untilComplete = "; NCCL uses multi-node NVLink only once every GPU's registration completed";
  if (!outside.empty()) {
    d.problem = NvlinkDomain::Problem::kMixed;
    d.problemWords = joined(outside, "; ");
  } else if (!notStarted.empty()) {
    d.problem = NvlinkDomain::Problem::kNotStarted;
    d.problemWords = "the fabric registration of " + gpuList(notStarted) + " has not started" + untilComplete;
  } else if (!inProgress.empty()) {
    d.problem = NvlinkDomain::Problem::kInProgress;
    d.problemWords = "the fabric registration of " + gpuList(inProgress) + " is in progress" + untilComplete;
  } else if (!failed.empty()) {
    d.problem = NvlinkDomain::Problem::kFailed;
    d.problemWords = "the fabric registration of " + gpuList(failed) + " completed with an error (NVML status " +
                     joined(failedStatus) + ")";
  } else if (!faults.empty()) {
    d.problem = NvlinkDomain::Problem::kUnhealthy;
    d.problemWords = d.faults;
  }
  return d;
}

}  // namespace podshaper
