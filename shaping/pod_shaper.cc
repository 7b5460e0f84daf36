#include "shaping/pod_shaper.h"

#include <algorithm>

#include "api/names.h"
#include "base/checked.h"
#include "base/json_util.h"
#include "base/quantity.h"
#include "shaping/memlock_pod.h"
#include "shaping/node_class.h"
#include "shaping/pod_inputs.h"
#include "shaping/request_limits.h"
#include "shaping/shm.h"

namespace podshaper {
namespace {

using json = nlohmann::json;

std::string key(std::string_view k) { return std::string(k); }

ShapeOutcome deny(const json& pod, const char* cause, std::string message) {
  ShapeOutcome out;
  out.allowed = false;
  out.cause = cause;
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
  auto holds = [](const json& term, const std::vector<json>& requirements) {
    const json& expressions = member(term, "matchExpressions");
    return expressions.is_array() && std::all_of(requirements.begin(), requirements.end(), [&](const json& r) {
             return std::find(expressions.begin(), expressions.end(), r) != expressions.end();
           });
  };
  for (const json& term : terms) {
    // A term that already holds one alternative (a shaped pod's manifest) is kept as it is.
    if (std::any_of(alternatives.begin(), alternatives.end(), [&](const auto& a) { return holds(term, a); })) {
      shaped.push_back(term);
      continue;
    }
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

bool namespaceOptedOut(const AdmissionContext& ctx) {
  if (ctx.cluster == nullptr) return false;
  auto ns = ctx.cluster->namespaceLabels.find(ctx.namespaceName);
  if (ns == ctx.cluster->namespaceLabels.end()) return false;
  auto v = ns->second.find(key(names::kInjectLabel));
  return v != ns->second.end() && v->second == "disabled";
}

// What podshaper wrote says the pod is shaped (a re-invocation, a shaped pod's manifest
// created again); a volume that only has podshaper's name does not.
bool alreadyShaped(const json& pod) { return annotation(pod, names::kShapedBy).has_value(); }

const json* volumeNamed(const json& pod, std::string_view name) {
  for (const json& v : member(member(pod, "spec"), "volumes")) {
    if (member(v, "name") == name) return &v;
  }
  return nullptr;
}

// A container's share of `bytes`, by its GPUs out of `of`, in whole MiB.
uint64_t shareOf(uint64_t bytes, uint64_t gpus, uint64_t of) {
  return ceilMiB(mulDivCeil(bytes, gpus, of).value_or(bytes)) * kMiB;
}

// A user's own /dev/shm volume is kept; say so if it is smaller than the container's share.
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

// The pod's GPUs against the nodes of its class: a node-exclusive pod owns a whole
// node. True when config partialNode: expand raised the first GPU container to G.
Result<bool> fitNodeClass(PodInputs& in, const NodeClass& nodeClass, const Config& config,
                          std::vector<std::string>& warnings) {
  const uint64_t G = nodeClass.gpus;
  if (!in.nodeExclusive && !in.allGpus && nodeClass.largestNode && in.podGpus > *nodeClass.largestNode) {
    return makeError("the pod asks " + std::to_string(in.podGpus) + " " + in.gpuWords + " but no node has that many: " +
                     nodeClass.sizes + ": split the job into pods of at most " +
                     std::to_string(*nodeClass.largestNode) + " GPUs each");
  }
  if (!in.nodeExclusive || in.podGpus == G) return false;
  if (in.podGpus > G) {
    return makeError("the pod asks " + std::to_string(in.podGpus) + " " + in.gpuWords +
                     " but nodes of its class have " + std::to_string(G) + " (" + nodeClass.source + ")" +
                     (nodeClass.sizes.empty() ? "" : "; " + nodeClass.sizes) + ": split the job into pods of " +
                     std::to_string(G) + " GPUs each");
  }
  std::string asks = "the pod asks " + std::to_string(in.podGpus) + " " + in.gpuWords +
                     " but node-exclusive pods own whole " + std::to_string(G) + "-GPU nodes (" + nodeClass.source +
                     ")";
  const std::string request = "request " + std::to_string(G) + " GPUs" +
                              (in.gpusFromClaims ? " in all (exactly.count in its resource claims)" : "");
  switch (config.partialNode) {
    case PartialNodePolicy::kDeny:
      return makeError(asks + ": " + request + " (one rank per GPU), or set " + key(names::kPlacement) +
                       ": shared to share the node");
    case PartialNodePolicy::kWarn:
      warnings.push_back(asks + "; the other GPUs stay idle");
      return false;
    case PartialNodePolicy::kExpand: {
      if (in.gpusFromClaims) {
        // A claim is its own object (the template's, or a claim several pods share):
        // the webhook does not rewrite it.
        warnings.push_back(asks + "; the other GPUs stay idle: config partialNode: expand does not raise a resource "
                           "claim's count, " + request);
        return false;
      }
      // The extra GPUs go to the first GPU container; its ranks follow.
      GpuContainer& first = in.gpuContainers.front();
      first.gpus += G - in.podGpus;
      warnings.push_back(asks + "; raised container \"" + first.name + "\" to " + std::to_string(first.gpus) +
                         " GPUs (config partialNode: expand)");
      in.podGpus = G;
      return true;
    }
  }
  return false;
}

// hostIPC and IPC_LOCK, unless the namespace's Pod Security level forbids them.
Result<bool> privilegesAllowed(const AdmissionContext& ctx, const Config& config,
                               std::vector<std::string>& warnings) {
  std::string level = podSecurityLevel(ctx);
  if (level != "baseline" && level != "restricted") return true;
  std::string why = "namespace \"" + ctx.namespaceName + "\" enforces Pod Security level \"" + level +
                    "\", which forbids hostIPC and the IPC_LOCK capability";
  if (config.podSecurity == PodSecurityAction::kDeny) {
    return makeError(why + ": label the namespace " + key(names::kPodSecurityEnforce) +
                     "=privileged, or ask the admin for config podSecurity: warn");
  }
  warnings.push_back(why + ": hostIPC and IPC_LOCK left out (config podSecurity: warn)");
  return false;
}

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

// limits.maxShmPercentOfNodeMemory: a /dev/shm that would take too much of the node is denied.
Result<bool> checkShmCap(const ShmPlan& plan, const NodeClass& nodeClass, const Config& config,
                         std::vector<std::string>& warnings) {
  if (!nodeClass.memoryBytes) {
    warnings.push_back("node memory unknown: the /dev/shm cap (limits.maxShmPercentOfNodeMemory) was not checked");
    return true;
  }
  auto cap = checkedMul(static_cast<uint64_t>(*nodeClass.memoryBytes), config.maxShmPercentOfNodeMemory);
  if (cap && plan.shmBytes > *cap / 100) {
    return makeError("/dev/shm would be " + formatBytes(static_cast<int64_t>(plan.shmBytes)) +
                     ", above limits.maxShmPercentOfNodeMemory (" + std::to_string(config.maxShmPercentOfNodeMemory) +
                     "%) of the node's " + formatBytes(*nodeClass.memoryBytes) + ": lower " + key(names::kWorkers) +
                     ", " + key(names::kPrefetchFactor) + ", the batch size or " + key(names::kNcclCommunicators) +
                     " (" + plan.formula + ")");
  }
  return true;
}

// What every GPU container of one pod gets, decided before the containers are shaped.
struct PodShape {
  const json& pod;
  const PodInputs& in;
  const Config& config;
  uint64_t shm = 0, ranks = 0;
  // podshaper's /dev/shm volume and the GPUs of the containers that mount it: the pod's
  // size when every GPU container does, else their share of it (docs/webhook.md
  // "Several GPU containers").
  uint64_t volume = 0, volumeGpus = 0;
  bool expanded = false;  // config partialNode: expand raised the first GPU container
  bool privilegedAllowed = false;
};

// The /dev/shm mount, and the container's memory raised by its share of the
// memory-backed emptyDir (which counts against the limit), rounded up to MiB.
Result<bool> mountShm(json& container, const GpuContainer& c, const PodShape& p) {
  ensureArray(container, "volumeMounts")
      .push_back({{"name", key(names::kShmVolume)}, {"mountPath", key(names::kShmMountPath)}});
  const uint64_t share = shareOf(p.volume, c.gpus, p.volumeGpus);
  json& resources = container["resources"];
  for (const char* field : {"limits", "requests"}) {
    if (!resources.contains(field) || !resources[field].contains("memory")) continue;
    auto raised = raiseMemory(resources[field]["memory"], share,
                              "container \"" + c.name + "\" resources." + field + ".memory");
    if (!raised) return raised.error();
    resources[field]["memory"] = *raised;
  }
  if (resources.is_object() && resources.empty()) container.erase("resources");
  return true;
}

// torchrun in each container starts its share of the pod's ranks.
void setNprocs(json& container, const GpuContainer& c, const PodShape& p, bool expandedHere,
               std::vector<std::string>& warnings) {
  json& env = ensureArray(container, "env");
  auto nproc = std::find_if(env.begin(), env.end(), [](const json& e) { return member(e, "name") == names::kNprocEnv; });
  std::string nprocs = std::to_string(mulDivCeil(p.ranks, c.gpus, p.in.podGpus).value_or(p.ranks));
  if (nproc == env.end()) {
    env.push_back({{"name", key(names::kNprocEnv)}, {"value", nprocs}});
  } else if (expandedHere && member(*nproc, "value") != nprocs) {
    warnings.push_back("container \"" + c.name + "\": " + key(names::kNprocEnv) + " set to " + nprocs +
                       " for the expanded GPU count");
    (*nproc)["value"] = nprocs;
  }
}

// One GPU container: its GPUs if expanded, /dev/shm and memory, IPC_LOCK, memlock,
// its ranks. True when it mounts the pod's shm volume.
Result<bool> shapeContainer(json& container, json& annotations, const GpuContainer& c, const PodShape& p,
                            std::vector<std::string>& warnings) {
  const bool expandedHere = p.expanded && &c == &p.in.gpuContainers.front();
  if (expandedHere) {
    json& resources = container["resources"];
    resources["limits"][key(names::kGpuResource)] = std::to_string(c.gpus);
    if (resources.contains("requests") && resources["requests"].contains(key(names::kGpuResource))) {
      resources["requests"][key(names::kGpuResource)] = std::to_string(c.gpus);
    }
  }
  bool mounted = false;
  if (c.ownShmVolume) {
    checkOwnShm(p.pod, c, shareOf(p.shm, c.gpus, p.in.podGpus), warnings);
  } else {
    auto ok = mountShm(container, c, p);
    if (!ok) return ok.error();
    mounted = true;
  }
  if (p.privilegedAllowed) {
    json& add = ensureArray(container["securityContext"]["capabilities"], "add");
    if (std::find(add.begin(), add.end(), key(names::kIpcLock)) == add.end()) add.push_back(key(names::kIpcLock));
  }
  MemlockAnnotation memlock = memlockAnnotation(annotations, c.name, p.config.memlock);
  if (memlock.set) annotations[memlock.set->first] = memlock.set->second;
  if (memlock.warning) warnings.push_back(*memlock.warning);
  if (p.privilegedAllowed) {
    if (auto nonRoot = nonRootMemlockWarning(c, memlock, p.config)) warnings.push_back(*nonRoot);
  }
  setNprocs(container, c, p, expandedHere, warnings);
  // The log's tail becomes the termination message when the container fails, so that a
  // DataLoader's "Bus error" or NCCL's "No space left on device" reach the pod's status
  // (the operator reads them there: docs/operator.md "Shaped pods explain themselves").
  // The API server fills in File before admission, so File counts as not chosen; a
  // message file the container writes still wins over its logs.
  if (const json& policy = member(container, "terminationMessagePolicy"); policy.is_null() || policy == "File") {
    container["terminationMessagePolicy"] = key(names::kFallbackToLogsOnError);
  }
  return mounted;
}

// Where the pod may run: alone on its node (node-exclusive), and on nodes the
// operator validated, with G GPUs, granting the memlock asked; with P2P between all GPU
// pairs where its NCCL reserve counts on P2P (a node without it would need more).
Result<bool> placePod(json& shaped, const PodInputs& in, const NodeClass& nodeClass, const Config& config,
                      bool needsP2P) {
  if (in.nodeExclusive) requireOnePodPerNode(shaped);
  if (!nodeClass.placeByLabels) return true;
  if (auto sized = checkNodeAffinitySize(shaped); !sized) return sized;
  // A node that grants the memlock asked: unlimited, or (for a number of
  // bytes) unlimited or at least that many, one nodeSelectorTerm each.
  std::vector<std::vector<json>> alternatives;
  for (json& memlock : memlockRequirements(config.memlock)) {
    std::vector<json> requirements{requirement(names::kTopologyValidated, "true"), std::move(memlock)};
    if (in.nodeExclusive) requirements.push_back(requirement(names::kGpuCount, std::to_string(nodeClass.gpus)));
    if (needsP2P) requirements.push_back(requirement(names::kP2P, std::string(names::kP2PAll)));
    alternatives.push_back(std::move(requirements));
  }
  requireNodeLabels(shaped["spec"], alternatives);
  return true;
}

// The warnings, one per line, as the podshaper.io/warnings annotation: at most
// kMaxWarningsBytes, cut at a line with a count of what was left out.
constexpr std::size_t kMaxWarningsBytes = 4096;
std::string warningsAnnotation(const std::vector<std::string>& warnings) {
  std::string text;
  std::size_t kept = 0;
  for (const std::string& w : warnings) {
    if (text.size() + w.size() + 1 > kMaxWarningsBytes) break;
    if (!text.empty()) text += '\n';
    text += w;
    ++kept;
  }
  if (kept < warnings.size()) {
    text += (text.empty() ? "" : "\n") + std::string("(") + std::to_string(warnings.size() - kept) +
            " more: the create response lists them all)";
  }
  return text;
}

ShapeOutcome shape(const json& pod, const Config& config, const AdmissionContext& ctx) {
  if (!pod.is_object() || !pod.contains("spec")) return deny(pod, "not-a-pod", "the object is not a Pod");
  ShapeOutcome out;
  out.pod = pod;
  if (!optedIn(pod) || namespaceOptedOut(ctx) || alreadyShaped(pod)) return out;
  if (auto sized = checkPodSize(pod); !sized) return deny(pod, "limits", sized.error().message);

  auto claims = readPodClaimGpus(pod, ctx.namespaceName, config.gpuDeviceClass, ctx.claims);
  if (!claims) return deny(pod, "claims", claims.error().message);
  auto read = readPodInputs(pod, config, *claims);
  if (!read) return deny(pod, "input", read.error().message);
  PodInputs in = std::move(read).value();
  std::vector<std::string> warnings = std::move(in.warnings);
  if (in.gpuContainers.empty()) {
    const bool claimsRead = ctx.claims && member(member(pod, "spec"), "resourceClaims").is_array();
    warnings.push_back("no container requests " + key(names::kGpuResource) +
                       (claimsRead ? " or GPUs of device class " + config.gpuDeviceClass + " through resource claims"
                                   : "") +
                       ": the pod is left as it is");
    for (auto& w : warnings) out.warnings.push_back("podshaper: " + w);
    return out;
  }

  NodeClass nodeClass = resolveNodeClass(in.allGpus ? std::nullopt : std::optional<uint64_t>(in.podGpus),
                                         in.requestedNodeGpus, in.nodeExclusive, config, ctx.cluster);
  warnings.insert(warnings.end(), nodeClass.warnings.begin(), nodeClass.warnings.end());
  if (in.allGpus) {
    // allocationMode All: the containers that use it see every GPU of the node.
    for (GpuContainer& c : in.gpuContainers) {
      if (c.allGpus) c.gpus = nodeClass.gpus;
    }
    in.podGpus = nodeClass.gpus;
    warnings.push_back("the pod asks every GPU of its node (allocationMode All): counted as " +
                       std::to_string(nodeClass.gpus) + " (" + nodeClass.source + ")");
  }
  auto expanded = fitNodeClass(in, nodeClass, config, warnings);
  if (!expanded) return deny(pod, "node-size", expanded.error().message);
  uint64_t ranks = in.ranks.value_or(in.podGpus);
  if (!in.ranks) {
    warnings.push_back(key(names::kRanksPerPod) + " not set: using " + std::to_string(ranks) + ", the pod's " +
                       in.gpuWords);
  }
  auto privileged = privilegesAllowed(ctx, config, warnings);
  if (!privileged) return deny(pod, "pod-security", privileged.error().message);
  auto plan = planShm(shmInputsFor(in, ranks, nodeClass, config),
                      in.ranks ? std::string(names::kRanksPerPod) : "the pod's " + in.gpuWords);
  if (!plan) return deny(pod, "shm-size", plan.error().message);
  if (auto capped = checkShmCap(*plan, nodeClass, config, warnings); !capped) return deny(pod, "shm-cap", capped.error().message);

  uint64_t volumeGpus = 0;
  for (const GpuContainer& c : in.gpuContainers) volumeGpus += c.ownShmVolume ? 0 : c.gpus;
  const bool partialVolume = volumeGpus > 0 && volumeGpus < in.podGpus;
  const uint64_t volume = partialVolume ? std::max(kMinShmBytes, shareOf(plan->shmBytes, volumeGpus, in.podGpus))
                                        : plan->shmBytes;
  if (volumeGpus > 0 && volumeNamed(pod, names::kShmVolume)) {
    return deny(pod, "volume-name", "spec.volumes has a volume named \"" + key(names::kShmVolume) +
                         "\", the name of the /dev/shm volume podshaper adds: rename it");
  }
  const PodShape shapeOf{pod, in, config, plan->shmBytes, ranks, volume, volumeGpus, *expanded, *privileged};
  const std::string shmText = formatBytes(static_cast<int64_t>(volume));
  json shaped = pod;
  json& spec = shaped["spec"];
  json& annotations = shaped["metadata"]["annotations"];
  bool needVolume = false;
  for (const GpuContainer& c : in.gpuContainers) {
    auto mounted = shapeContainer(spec["containers"][c.index], annotations, c, shapeOf, warnings);
    if (!mounted) return deny(pod, "container", mounted.error().message);
    needVolume = needVolume || *mounted;
  }
  if (needVolume) {
    ensureArray(spec, "volumes")
        .push_back({{"name", key(names::kShmVolume)}, {"emptyDir", {{"medium", "Memory"}, {"sizeLimit", shmText}}}});
  }
  if (*privileged) spec["hostIPC"] = true;
  if (auto placed = placePod(shaped, in, nodeClass, config, plan->ncclTransport == NcclTransport::kP2P); !placed) {
    return deny(pod, "placement", placed.error().message);
  }

  annotations[key(names::kShmSize)] = shmText;
  annotations[key(names::kShmFormula)] =
      partialVolume ? plan->formula + "; podshaper's /dev/shm serves the containers holding " +
                          std::to_string(volumeGpus) + " of the pod's " + std::to_string(in.podGpus) +
                          " GPUs (the others mount their own): " + shmText
                    : plan->formula;
  annotations[key(names::kShapedBy)] = ctx.shaperVersion + " config=" + config.hash();
  for (auto& w : warnings) {
    if (w.starts_with("podshaper: ")) w.erase(0, std::string_view("podshaper: ").size());
  }
  // What podshaper told at admission, and nothing a user wrote under its name.
  if (!warnings.empty()) annotations[key(names::kWarnings)] = warningsAnnotation(warnings);
  else annotations.erase(key(names::kWarnings));
  shaped["metadata"]["labels"][key(names::kShapedLabel)] = "true";
  if (auto fit = fitAnnotations(pod, shaped); !fit) return deny(pod, "limits", fit.error().message);

  out.pod = std::move(shaped);
  for (auto& w : warnings) out.warnings.push_back("podshaper: " + w);
  return out;
}

}  // namespace

// The MutatingWebhookConfiguration's objectSelector sends only labelled pods;
// checking again keeps a misconfigured registration from shaping other pods.
bool optedIn(const json& pod) {
  return member(member(member(pod, "metadata"), "labels"), key(names::kInjectLabel)) == "true";
}

ShapeOutcome shapePod(const json& pod, const Config& config, const AdmissionContext& context) {
  try {
    return shape(pod, config, context);
  } catch (const json::exception&) {
    // The API server decodes pods before admission, so this means a hand-made
    // request; deny rather than guess, in words (not the library's).
    return deny(pod, "unreadable", "the pod could not be read: a field podshaper reads has the wrong type (a hand-made request? "
                     "the API server sends pods it has decoded)");
  }
}

}  // namespace podshaper
