#include "shaping/pod_shaper.h"

#include <algorithm>

#include "base/checked.h"
#include "base/json_util.h"
#include "shaping/memlock_pod.h"
#include "api/names.h"
#include "shaping/node_class.h"
#include "shaping/pod_inputs.h"
#include "base/quantity.h"
#include "shaping/shm.h"

namespace podshaper {
namespace {

using json = nlohmann::json;

std::string key(std::string_view k) { return std::string(k); }

ShapeOutcome deny(const json& pod, std::string message) {
  ShapeOutcome out;
  out.allowed = false;
  out.message = "podshaper: " + std::move(message);
  out.pod = pod;
  return out;
}

json& ensureArray(json& parent, std::string_view name) {
  json& a = parent[key(name)];
  if (!a.is_array()) a = json::array();
  return a;
}

json requirement(std::string_view label, std::string value) {
  return {{"key", key(label)}, {"operator", "In"}, {"values", json::array({std::move(value)})}};
}

// Adds our required node-label requirements to every nodeSelectorTerm (terms are
// ORed, expressions within one ANDed), or makes the first term. `alternatives`
// holds the requirements a node may meet instead of one another: each term
// becomes one term per alternative, its own expressions and that alternative's.
void requireNodeLabels(json& spec, const std::vector<std::vector<json>>& alternatives) {
  json& required = spec["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"];
  json& terms = ensureArray(required, "nodeSelectorTerms");
  if (terms.empty()) terms.push_back(json::object());
  json shaped = json::array();
  for (const json& term : terms) {
    for (const auto& requirements : alternatives) {
      json next = term;
      json& expressions = ensureArray(next, "matchExpressions");
      for (const json& r : requirements) {
        if (std::find(expressions.begin(), expressions.end(), r) == expressions.end()) {
          expressions.push_back(r);
        }
      }
      shaped.push_back(std::move(next));
    }
  }
  terms = std::move(shaped);
}

// A GPU container that runs, or may run, as a non-root user: IPC_LOCK does not
// take effect for it (Kubernetes sets no ambient capabilities), so what it may
// lock is its RLIMIT_MEMLOCK alone. Says where that limit comes from.
std::optional<std::string> nonRootMemlockWarning(const GpuContainer& c, const MemlockAnnotation& memlock,
                                                 const Config& config) {
  std::string who;
  if (c.runAsUser) {
    if (*c.runAsUser == 0) return std::nullopt;
    who = "runs as user " + std::to_string(*c.runAsUser);
  } else if (c.runAsNonRoot) {
    who = "sets runAsNonRoot without runAsUser, so it may run as a non-root user";
  } else {
    return std::nullopt;
  }
  std::string limit;
  if (memlock.set) {
    limit = "RLIMIT_MEMLOCK from the NRI annotation " + memlock.set->first + " (" + config.memlock.words() +
            "), which the node must grant (node label " + key(names::kMemlock) + ")";
  } else if (!memlock.warning) {
    limit = "RLIMIT_MEMLOCK from the pod's own ulimit annotation, which the node must grant";
  } else {
    limit = "the RLIMIT_MEMLOCK of the node's container runtime (no NRI annotation)";
  }
  const bool may = !c.runAsUser;
  return "container \"" + c.name + "\" " + who + ": IPC_LOCK is not effective for a non-root process, so the memory " +
         "it can lock " + (may ? "may rest" : "rests") + " on " + limit;
}

void requireOnePodPerNode(json& pod) {
  pod["metadata"]["labels"][key(names::kPlacementLabel)] = key(names::kNodeExclusive);
  json term = {
      {"labelSelector",
       {{"matchExpressions", json::array({requirement(names::kPlacementLabel, key(names::kNodeExclusive))})}}},
      {"topologyKey", key(names::kHostnameLabel)},
      // Without it the term would only see pods of this pod's own namespace.
      {"namespaceSelector", json::object()}};
  json& terms = ensureArray(pod["spec"]["affinity"]["podAntiAffinity"],
                            "requiredDuringSchedulingIgnoredDuringExecution");
  if (std::find(terms.begin(), terms.end(), term) == terms.end()) terms.push_back(term);
}

// Raises a container's memory (a quantity string) by `extra` bytes.
Result<std::string> raiseMemory(const json& current, uint64_t extra, const std::string& what) {
  auto bytes = parseQuantity(current.is_string() ? current.get<std::string>() : current.dump());
  if (!bytes) return makeError(what + " " + bytes.error().message);
  auto sum = checkedAdd(static_cast<uint64_t>(*bytes), extra);
  if (!sum || *sum > static_cast<uint64_t>(INT64_MAX)) return makeError(what + " overflows");
  return formatBytes(static_cast<int64_t>(*sum));
}

std::string podSecurityLevel(const AdmissionContext& ctx) {
  if (ctx.cluster == nullptr) return {};
  auto ns = ctx.cluster->namespaceLabels.find(ctx.namespaceName);
  if (ns == ctx.cluster->namespaceLabels.end()) return {};
  auto level = ns->second.find(key(names::kPodSecurityEnforce));
  return level == ns->second.end() ? std::string() : level->second;
}

// The MutatingWebhookConfiguration's objectSelector sends only labelled pods;
// checking again keeps a misconfigured registration from shaping other pods.
bool optedIn(const json& pod) {
  return member(member(member(pod, "metadata"), "labels"), key(names::kInjectLabel)) == "true";
}

bool namespaceOptedOut(const AdmissionContext& ctx) {
  if (ctx.cluster == nullptr) return false;
  auto ns = ctx.cluster->namespaceLabels.find(ctx.namespaceName);
  if (ns == ctx.cluster->namespaceLabels.end()) return false;
  auto v = ns->second.find(key(names::kInjectLabel));
  return v != ns->second.end() && v->second == "disabled";
}

bool alreadyShaped(const json& pod) {
  if (annotation(pod, names::kShapedBy)) return true;
  const json& volumes = member(member(pod, "spec"), "volumes");
  if (!volumes.is_array()) return false;
  return std::any_of(volumes.begin(), volumes.end(), [](const json& v) {
    return v.is_object() && v.value("name", std::string()) == names::kShmVolume;
  });
}

// A user's own /dev/shm volume is kept; say so if it is smaller than needed.
void checkOwnShm(const json& pod, const GpuContainer& c, uint64_t shmBytes,
                 std::vector<std::string>& warnings) {
  const json& volumes = member(member(pod, "spec"), "volumes");
  if (!volumes.is_array()) return;
  for (const json& v : volumes) {
    if (!v.is_object() || v.value("name", std::string()) != *c.ownShmVolume) continue;
    const json& emptyDir = member(v, "emptyDir");
    if (!emptyDir.is_object() || !emptyDir.contains("sizeLimit")) return;
    auto limit = parseQuantity(emptyDir["sizeLimit"].is_string() ? emptyDir["sizeLimit"].get<std::string>() : "");
    if (limit && static_cast<uint64_t>(*limit) < shmBytes) {
      warnings.push_back("container \"" + c.name + "\" keeps its own /dev/shm volume \"" +
                         *c.ownShmVolume + "\" of " + formatBytes(*limit) + ", smaller than the " +
                         formatBytes(static_cast<int64_t>(shmBytes)) +
                         " its DataLoader needs; DataLoader workers may die with a bus error");
    }
    return;
  }
}

ShapeOutcome shape(const json& pod, const Config& config, const AdmissionContext& ctx) {
  if (!pod.is_object() || !pod.contains("spec")) return deny(pod, "the object is not a Pod");
  ShapeOutcome out;
  out.pod = pod;
  if (!optedIn(pod) || namespaceOptedOut(ctx) || alreadyShaped(pod)) return out;

  auto read = readPodInputs(pod, config);
  if (!read) return deny(pod, read.error().message);
  PodInputs in = std::move(read).value();
  if (in.gpuContainers.empty()) {
    out.warnings.push_back("podshaper: no container requests " + key(names::kGpuResource) +
                           ": the pod is left as it is");
    return out;
  }
  std::vector<std::string> warnings = std::move(in.warnings);

  NodeClass nodeClass = resolveNodeClass(in.podGpus, in.requestedNodeGpus, in.nodeExclusive, config, ctx.cluster);
  warnings.insert(warnings.end(), nodeClass.warnings.begin(), nodeClass.warnings.end());
  const uint64_t G = nodeClass.gpus;
  bool expanded = false;
  if (in.nodeExclusive && in.podGpus > G) {
    return deny(pod, "the pod asks " + std::to_string(in.podGpus) + " " + key(names::kGpuResource) +
                         " but nodes of its class have " + std::to_string(G) + " (" +
                         nodeClass.source + "): split the job into pods of " + std::to_string(G) +
                         " GPUs each");
  }
  if (in.nodeExclusive && in.podGpus < G) {
    std::string asks = "the pod asks " + std::to_string(in.podGpus) + " " +
                       key(names::kGpuResource) + " but node-exclusive pods own whole " +
                       std::to_string(G) + "-GPU nodes (" + nodeClass.source + ")";
    switch (config.partialNode) {
      case PartialNodePolicy::kDeny:
        return deny(pod, asks + ": request " + std::to_string(G) + " GPUs (one rank per GPU), or set " +
                             key(names::kPlacement) + ": shared to share the node");
      case PartialNodePolicy::kWarn:
        warnings.push_back(asks + "; the other GPUs stay idle");
        break;
      case PartialNodePolicy::kExpand: {
        // The extra GPUs go to the first GPU container; its ranks follow.
        GpuContainer& first = in.gpuContainers.front();
        first.gpus += G - in.podGpus;
        warnings.push_back(asks + "; raised container \"" + first.name + "\" to " +
                           std::to_string(first.gpus) + " GPUs (config partialNode: expand)");
        in.podGpus = G;
        expanded = true;
        break;
      }
    }
  }
  uint64_t ranks = in.ranks.value_or(in.podGpus);
  if (!in.ranks) {
    warnings.push_back(key(names::kRanksPerPod) + " not set: using " + std::to_string(ranks) +
                       ", the pod's " + key(names::kGpuResource));
  }

  std::string level = podSecurityLevel(ctx);
  bool privilegedAllowed = level != "baseline" && level != "restricted";
  if (!privilegedAllowed) {
    std::string why = "namespace \"" + ctx.namespaceName + "\" enforces Pod Security level \"" + level +
                      "\", which forbids hostIPC and the IPC_LOCK capability";
    if (config.podSecurity == PodSecurityAction::kDeny) {
      return deny(pod, why + ": label the namespace " + key(names::kPodSecurityEnforce) +
                           "=privileged, or ask the admin for config podSecurity: warn");
    }
    warnings.push_back(why + ": hostIPC and IPC_LOCK left out (config podSecurity: warn)");
  }

  ShmInputs shmIn;
  shmIn.ranks = ranks;
  shmIn.workers = in.workers;
  shmIn.prefetchFactor = in.prefetchFactor;
  shmIn.batch = in.batch;
  shmIn.headroomPercent = config.headroomPercent;
  // NCCL keeps segments in /dev/shm even with P2P between every GPU pair (its proxy and
  // network buffers), and more where P2P is missing (its SHM transport): docs/webhook.md.
  const std::string reserveKey =
      nodeClass.p2pAllPairs ? "defaults.ncclShmReservePerRankWithP2P" : "defaults.ncclShmReservePerRank";
  shmIn.ncclReservePerRank = static_cast<uint64_t>(
      nodeClass.p2pAllPairs ? config.ncclShmReservePerRankWithP2P : config.ncclShmReservePerRank);
  if (shmIn.ncclReservePerRank == 0) {
    shmIn.ncclReserveWhy = "config " + reserveKey + " is 0";
  } else if (nodeClass.p2pAllPairs) {
    shmIn.ncclReserveWhy = "target nodes validated with P2P between all GPU pairs: config " + reserveKey;
  } else {
    shmIn.ncclReserveWhy =
        "P2P between all GPU pairs not validated on the target nodes, so NCCL may use its SHM transport: config " +
        reserveKey;
  }
  auto plan = planShm(shmIn);
  if (!plan) return deny(pod, plan.error().message);
  const uint64_t shm = plan->shmBytes;
  const std::string shmText = formatBytes(static_cast<int64_t>(shm));

  if (nodeClass.memoryBytes) {
    auto cap = checkedMul(static_cast<uint64_t>(*nodeClass.memoryBytes), config.maxShmPercentOfNodeMemory);
    if (cap && shm > *cap / 100) {
      return deny(pod, "/dev/shm would be " + shmText + ", above limits.maxShmPercentOfNodeMemory (" +
                           std::to_string(config.maxShmPercentOfNodeMemory) + "%) of the node's " +
                           formatBytes(*nodeClass.memoryBytes) + ": lower " + key(names::kWorkers) +
                           ", " + key(names::kPrefetchFactor) + " or the batch size (" +
                           plan->formula + ")");
    }
  } else {
    warnings.push_back("node memory unknown: the /dev/shm cap (limits.maxShmPercentOfNodeMemory) was not checked");
  }

  json shaped = pod;
  json& spec = shaped["spec"];
  json& containers = spec["containers"];
  json& annotations = shaped["metadata"]["annotations"];
  bool needVolume = false;
  for (const GpuContainer& c : in.gpuContainers) {
    json& container = containers[c.index];
    if (expanded && &c == &in.gpuContainers.front()) {
      json& resources = container["resources"];
      resources["limits"][key(names::kGpuResource)] = std::to_string(c.gpus);
      if (resources.contains("requests") && resources["requests"].contains(key(names::kGpuResource))) {
        resources["requests"][key(names::kGpuResource)] = std::to_string(c.gpus);
      }
    }
    if (c.ownShmVolume) {
      checkOwnShm(pod, c, shm, warnings);
    } else {
      needVolume = true;
      ensureArray(container, "volumeMounts")
          .push_back({{"name", key(names::kShmVolume)}, {"mountPath", key(names::kShmMountPath)}});
      // The memory-backed emptyDir counts against the memory limit: pay for this
      // container's share of it, rounded up to MiB.
      uint64_t share = ceilMiB(mulDivCeil(shm, c.gpus, in.podGpus).value_or(shm)) * kMiB;
      json& resources = container["resources"];
      for (const char* field : {"limits", "requests"}) {
        if (!resources.contains(field) || !resources[field].contains("memory")) continue;
        auto raised = raiseMemory(resources[field]["memory"], share,
                                  "container \"" + c.name + "\" resources." + field + ".memory");
        if (!raised) return deny(pod, raised.error().message);
        resources[field]["memory"] = *raised;
      }
      if (resources.is_object() && resources.empty()) container.erase("resources");
    }
    if (privilegedAllowed) {
      json& add = ensureArray(container["securityContext"]["capabilities"], "add");
      if (std::find(add.begin(), add.end(), key(names::kIpcLock)) == add.end()) {
        add.push_back(key(names::kIpcLock));
      }
    }
    MemlockAnnotation memlock = memlockAnnotation(annotations, c.name, config.memlock);
    if (memlock.set) annotations[memlock.set->first] = memlock.set->second;
    if (memlock.warning) warnings.push_back(*memlock.warning);
    if (privilegedAllowed) {
      if (auto nonRoot = nonRootMemlockWarning(c, memlock, config)) warnings.push_back(*nonRoot);
    }

    json& env = ensureArray(container, "env");
    auto nproc = std::find_if(env.begin(), env.end(), [](const json& e) {
      return e.is_object() && e.value("name", std::string()) == names::kNprocEnv;
    });
    // torchrun in each container starts its share of the pod's ranks.
    std::string nprocs = std::to_string(mulDivCeil(ranks, c.gpus, in.podGpus).value_or(ranks));
    if (nproc == env.end()) {
      env.push_back({{"name", key(names::kNprocEnv)}, {"value", nprocs}});
    } else if (expanded && &c == &in.gpuContainers.front() && nproc->value("value", std::string()) != nprocs) {
      warnings.push_back("container \"" + c.name + "\": " + key(names::kNprocEnv) + " set to " + nprocs +
                         " for the expanded GPU count");
      (*nproc)["value"] = nprocs;
    }
  }
  if (needVolume) {
    ensureArray(spec, "volumes")
        .push_back({{"name", key(names::kShmVolume)},
                    {"emptyDir", {{"medium", "Memory"}, {"sizeLimit", shmText}}}});
  }
  if (privilegedAllowed) spec["hostIPC"] = true;

  if (in.nodeExclusive) requireOnePodPerNode(shaped);
  if (nodeClass.placeByLabels) {
    // A node that grants the memlock asked: unlimited, or (for a number of
    // bytes) unlimited or at least that many, one nodeSelectorTerm each.
    std::vector<std::vector<json>> alternatives;
    for (json& memlock : memlockRequirements(config.memlock)) {
      std::vector<json> requirements{requirement(names::kTopologyValidated, "true"), std::move(memlock)};
      if (in.nodeExclusive) requirements.push_back(requirement(names::kGpuCount, std::to_string(G)));
      alternatives.push_back(std::move(requirements));
    }
    requireNodeLabels(spec, alternatives);
  }

  annotations[key(names::kShmSize)] = shmText;
  annotations[key(names::kShmFormula)] = plan->formula;
  annotations[key(names::kShapedBy)] = ctx.shaperVersion + " config=" + config.hash();

  out.pod = std::move(shaped);
  for (auto& w : warnings) out.warnings.push_back(w.starts_with("podshaper: ") ? w : "podshaper: " + w);
  return out;
}

}  // namespace

ShapeOutcome shapePod(const json& pod, const Config& config, const AdmissionContext& context) {
  try {
    return shape(pod, config, context);
  } catch (const json::exception& e) {
    // The API server decodes pods before admission, so this means a hand-made
    // request; deny rather than guess.
    return deny(pod, std::string("the pod is malformed: ") + e.what());
  }
}

}  // namespace podshaper
