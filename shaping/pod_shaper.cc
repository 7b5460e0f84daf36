#include "shaping/pod_shaper.h"

#include <algorithm>

#include "api/names.h"
#include "base/checked.h"
#include "base/json_edit.h"
#include "base/json_util.h"
#include "base/quantity.h"
#include "base/text.h"
#include "shaping/memlock_pod.h"
#include "shaping/node_class.h"
#include "shaping/placement.h"
#include "shaping/pod_inputs.h"
#include "shaping/pod_shm.h"
#include "shaping/privileges.h"
#include "shaping/request_limits.h"
#include "shaping/shm.h"

namespace podshaper {
namespace {

using json = nlohmann::json;

ShapeOutcome unchanged(json& pod, std::vector<std::string> warnings = {}) {
  ShapeOutcome out;
  out.pod = std::move(pod);
  for (auto& w : warnings) out.warnings.push_back("podshaper: " + w);
  return out;
}

// Without the pod: shapePod(const json&) puts the one it was given back.
ShapeOutcome deny(const char* cause, std::string message) {
  ShapeOutcome out;
  out.allowed = false;
  out.cause = cause;
  out.message = "podshaper: " + std::move(message);
  return out;
}

// Raises a container's memory (a quantity string) by `extra` bytes.
Result<std::string> raiseMemory(const json& current, uint64_t extra, const std::string& what) {
  auto bytes = parseQuantity(current.is_string() ? current.get<std::string>() : current.dump());
  if (!bytes) return makeError(what + " " + bytes.error().message);
  auto sum = checkedAdd(static_cast<uint64_t>(*bytes), extra);
  if (!sum || *sum > static_cast<uint64_t>(INT64_MAX)) return makeError(what + " overflows");
  return formatBytes(static_cast<int64_t>(*sum));
}

bool namespaceOptedOut(const AdmissionContext& ctx) {
  if (ctx.cluster == nullptr) return false;
  auto ns = ctx.cluster->namespaceLabels.find(ctx.namespaceName);
  if (ns == ctx.cluster->namespaceLabels.end()) return false;
  auto v = ns->second.find(std::string(names::kInjectLabel));
  return v != ns->second.end() && v->second == "disabled";
}

// What podshaper wrote says the pod is shaped (a re-invocation, a shaped pod's manifest
// created again); a volume that only has podshaper's name does not.
bool alreadyShaped(const json& pod) { return annotation(pod, names::kShapedBy).has_value(); }

// What every GPU container of one pod gets, decided before the containers are shaped.
struct PodShape {
  const PodInputs& in;
  const Config& config;
  uint64_t ranks = 0;
  // podshaper's /dev/shm volume and the GPUs of the containers that mount it: the pod's
  // size when every GPU container does, else their share of it (docs/webhook.md
  // "Several GPU containers").
  ShmVolume volume;
  // The user's own /dev/shm volumes, kept or adopted (config shm.adoptOwnVolume).
  const std::vector<OwnShm>& owns;
  GpuFit fit = GpuFit::kAsAsked;
  Privileges privileges = Privileges::kLeftOut;
};

// A GPU container's place in the pod, for JsonEdit paths.
struct ContainerAt {
  const json& container;  // as it is now
  std::size_t index;
};

// The container's memory raised by its share of a memory-backed emptyDir podshaper sized
// (its pages count against the limit), rounded up to MiB.
Result<void> raiseForShm(JsonEdit& edit, const ContainerAt& at, const GpuContainer& c, uint64_t share) {
  const json& resources = member(at.container, "resources");
  for (const char* field : {"limits", "requests"}) {
    const json& limits = member(resources, field);
    if (!limits.is_object() || !limits.contains("memory")) continue;
    const json& memory = limits["memory"];
    auto raised = raiseMemory(memory, share, "container \"" + c.name + "\" resources." + field + ".memory");
    if (!raised) return raised.error();
    edit.set({"spec", "containers", at.index, "resources", field, "memory"}, *raised);
  }
  // An empty resources is left out, as the API server would store it.
  if (resources.is_object() && resources.empty()) edit.erase({"spec", "containers", at.index, "resources"});
  return {};
}

// The /dev/shm mount of podshaper's volume, and the memory for the container's share.
Result<void> mountShm(JsonEdit& edit, const ContainerAt& at, const GpuContainer& c, const PodShape& p) {
  static const JsonText kMount(jsonObject("name", names::kShmVolume, "mountPath", names::kShmMountPath));
  edit.append({"spec", "containers", at.index, "volumeMounts"}, kMount);
  return raiseForShm(edit, at, c, shareOf(p.volume.bytes, c.gpus, p.volume.gpus));
}

// A volume of the user's: kept as written, or adopted, its containers' memory raised as
// for podshaper's own volume (by their share of the sizeLimit set, all of it).
Result<void> keepOwnShm(JsonEdit& edit, const ContainerAt& at, const GpuContainer& c, const PodShape& p) {
  for (const OwnShm& own : p.owns) {
    if (own.volume.name != *c.ownShmVolume || !own.adopted) continue;
    return raiseForShm(edit, at, c, shareOf(own.needBytes, c.gpus, own.gpus));
  }
  return {};
}

// torchrun in each container starts its share of the pod's ranks.
void setNprocs(JsonEdit& edit, const ContainerAt& at, const GpuContainer& c, const PodShape& p, bool expandedHere,
               std::vector<std::string>& warnings) {
  const json& env = member(at.container, "env");
  std::string nprocs = std::to_string(mulDivCeil(p.ranks, c.gpus, p.in.podGpus).value_or(p.ranks));
  auto isNproc = [](const json& e) { return hasText(member(e, "name"), names::kNprocEnv); };
  const auto nproc = env.is_array() ? std::find_if(env.begin(), env.end(), isNproc) : env.end();
  if (nproc == env.end()) {
    edit.append({"spec", "containers", at.index, "env"},
                jsonObject("name", names::kNprocEnv, "value", std::move(nprocs)));
  } else if (expandedHere && !hasText(member(*nproc, "value"), nprocs)) {
    warnings.push_back("container \"" + c.name + "\": " + std::string(names::kNprocEnv) + " set to " + nprocs +
                       " for the expanded GPU count");
    edit.set({"spec", "containers", at.index, "env", static_cast<std::size_t>(nproc - env.begin()), "value"}, nprocs);
  }
}

enum class ShmMount {
  kPodsVolume,  // podshaper's /dev/shm volume
  kItsOwn,      // a /dev/shm volume of the user's, kept
};

// One GPU container: its GPUs if expanded, /dev/shm and memory, IPC_LOCK, memlock,
// its ranks.
Result<ShmMount> shapeContainer(JsonEdit& edit, const GpuContainer& c, const PodShape& p,
                                std::vector<std::string>& warnings) {
  const ContainerAt at{edit.document().at("spec").at("containers").at(c.index), c.index};
  const bool expandedHere = p.fit == GpuFit::kExpanded && &c == &p.in.gpuContainers.front();
  if (expandedHere) {
    const std::string gpus = std::to_string(c.gpus);
    edit.set({"spec", "containers", c.index, "resources", "limits", names::kGpuResource}, gpus);
    if (const json& requests = member(member(at.container, "resources"), "requests");
        requests.is_object() && requests.contains(names::kGpuResource)) {
      edit.set({"spec", "containers", c.index, "resources", "requests", names::kGpuResource}, gpus);
    }
  }
  ShmMount mount = ShmMount::kItsOwn;
  if (c.ownShmVolume) {
    auto kept = keepOwnShm(edit, at, c, p);
    if (!kept) return kept.error();
  } else {
    auto mounted = mountShm(edit, at, c, p);
    if (!mounted) return mounted.error();
    mount = ShmMount::kPodsVolume;
  }
  const bool privileged = p.privileges == Privileges::kGranted;
  if (privileged) {
    const json& add = member(member(member(at.container, "securityContext"), "capabilities"), "add");
    if (!add.is_array() || std::find(add.begin(), add.end(), names::kIpcLock) == add.end()) {
      edit.append({"spec", "containers", c.index, "securityContext", "capabilities", "add"}, names::kIpcLock);
    }
  }
  const json& annotations = member(member(edit.document(), "metadata"), "annotations");
  MemlockAnnotation memlock = memlockAnnotation(annotations, c.name, p.config.memlock);
  if (memlock.set) edit.set({"metadata", "annotations", memlock.set->first}, memlock.set->second);
  if (memlock.warning) warnings.push_back(*memlock.warning);
  if (privileged) {
    if (auto nonRoot = nonRootMemlockWarning(c, memlock, p.config)) warnings.push_back(*nonRoot);
  }
  setNprocs(edit, at, c, p, expandedHere, warnings);
  // The log's tail becomes the termination message when the container fails, so that a
  // DataLoader's "Bus error" or NCCL's "No space left on device" reach the pod's status
  // (the operator reads them there: docs/operator.md "Shaped pods explain themselves").
  // The API server fills in File before admission, so File counts as not chosen; a
  // message file the container writes still wins over its logs.
  if (const json& policy = member(at.container, "terminationMessagePolicy");
      policy.is_null() || hasText(policy, "File")) {
    edit.set({"spec", "containers", c.index, "terminationMessagePolicy"}, names::kFallbackToLogsOnError);
  }
  return mount;
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

ShapeOutcome shape(json& pod, const Config& config, const AdmissionContext& ctx) {
  if (!pod.is_object() || !pod.contains("spec")) return deny("not-a-pod", "the object is not a Pod");
  if (!optedIn(pod) || namespaceOptedOut(ctx) || alreadyShaped(pod)) return unchanged(pod);
  if (auto sized = checkPodSize(pod); !sized) return deny("limits", sized.error().message);

  auto claims = readPodClaimGpus(pod, ctx.namespaceName, config.gpuDeviceClass, ctx.claims);
  if (!claims) return deny("claims", claims.error().message);
  auto read = readPodInputs(pod, config, *claims);
  if (!read) return deny("input", read.error().message);
  PodInputs in = std::move(read).value();
  std::vector<std::string> warnings = std::move(in.warnings);
  if (in.gpuContainers.empty()) {
    const bool claimsRead = ctx.claims && member(member(pod, "spec"), "resourceClaims").is_array();
    warnings.push_back("no container requests " + std::string(names::kGpuResource) +
                       (claimsRead ? " or GPUs of device class " + config.gpuDeviceClass + " through resource claims"
                                   : "") +
                       ": the pod is left as it is");
    return unchanged(pod, std::move(warnings));
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
  auto fit = fitNodeClass(in, nodeClass, config, warnings);
  if (!fit) return deny("node-size", fit.error().message);
  uint64_t ranks = in.ranks.value_or(in.podGpus);
  if (!in.ranks) {
    warnings.push_back(std::string(names::kRanksPerPod) + " not set: using " + std::to_string(ranks) + ", the pod's " +
                       in.gpuWords);
  }
  auto privileges = decidePrivileges(ctx, config, warnings);
  if (!privileges) return deny("pod-security", privileges.error().message);
  auto plan = planPodShm(in, ranks, nodeClass, config);
  if (!plan) return deny("shm-size", plan.error().message);
  if (auto capped = checkShmCap(*plan, nodeClass, config, warnings); !capped) return deny("shm-cap", capped.error().message);

  const ShmVolume volume = shmVolumeFor(in, *plan);
  if (volume.gpus > 0 && volumeNamed(pod, names::kShmVolume)) {
    return deny("volume-name", "spec.volumes has a volume named \"" + std::string(names::kShmVolume) +
                         "\", the name of the /dev/shm volume podshaper adds: rename it");
  }
  const std::vector<OwnShm> owns = ownShmVolumes(pod, in, *plan, config);
  const PodShape shapeOf{in, config, ranks, volume, owns, *fit, *privileges};
  const std::string shmText = formatBytes(static_cast<int64_t>(volume.bytes));
  // From here on the pod is changed where it lies, each change written down as the patch.
  const std::size_t annotationsBefore = annotationsBytes(pod);
  JsonEdit edit(pod);
  bool needVolume = false;
  for (const GpuContainer& c : in.gpuContainers) {
    auto mount = shapeContainer(edit, c, shapeOf, warnings);
    if (!mount) return deny("container", mount.error().message);
    needVolume = needVolume || *mount == ShmMount::kPodsVolume;
  }
  for (const OwnShm& own : owns) {
    warnOwnShm(pod, own, warnings);
    if (own.adopted) {
      edit.set({"spec", "volumes", own.volume.index, "emptyDir", "sizeLimit"},
               formatBytes(static_cast<int64_t>(own.needBytes)));
    }
  }
  if (needVolume) {
    edit.append({"spec", "volumes"},
                jsonObject("name", names::kShmVolume, "emptyDir",
                           jsonObject("medium", "Memory", "sizeLimit", shmText)));
  }
  if (*privileges == Privileges::kGranted) edit.set({"spec", "hostIPC"}, true);
  if (auto placed = placePod(edit, in, nodeClass, config, plan->ncclTransport == NcclTransport::kP2P); !placed) {
    return deny("placement", placed.error().message);
  }

  // shm-size is the /dev/shm the pod will have: podshaper's volume's, else a kept
  // volume's sizeLimit; none for a volume without one, the host's, or one of several.
  std::optional<std::string> shmSize;
  std::string formula = plan->formula;
  if (owns.empty()) {
    shmSize = shmText;
  } else {
    formula += " needed";
    if (volume.gpus > 0) {
      shmSize = shmText;
      formula += "; podshaper's /dev/shm serves the containers holding " + std::to_string(volume.gpus) +
                 " of the pod's " + counted(in.podGpus, "GPU") + ": " + shmText;
    } else if (owns.size() == 1) {
      shmSize = owns.front().size();
    }
    for (const OwnShm& own : owns) formula += "; " + ownShmWords(own, in);
  }
  if (shmSize) edit.set({"metadata", "annotations", names::kShmSize}, *shmSize);
  else edit.erase({"metadata", "annotations", names::kShmSize});
  edit.set({"metadata", "annotations", names::kShmFormula}, formula);
  edit.set({"metadata", "annotations", names::kShapedBy}, ctx.shaperVersion + " config=" + config.hash());
  for (auto& w : warnings) {
    if (w.starts_with("podshaper: ")) w.erase(0, std::string_view("podshaper: ").size());
  }
  // What podshaper told at admission, and nothing a user wrote under its name.
  if (!warnings.empty()) edit.set({"metadata", "annotations", names::kWarnings}, warningsAnnotation(warnings));
  else edit.erase({"metadata", "annotations", names::kWarnings});
  edit.set({"metadata", "labels", names::kShapedLabel}, "true");
  if (auto fit = fitAnnotations(annotationsBefore, edit); !fit) return deny("limits", fit.error().message);

  ShapeOutcome out;
  out.patch = edit.patch();
  out.pod = std::move(pod);
  for (auto& w : warnings) out.warnings.push_back("podshaper: " + w);
  return out;
}

}  // namespace

// The MutatingWebhookConfiguration's objectSelector sends only labelled pods;
// checking again keeps a misconfigured registration from shaping other pods.
bool optedIn(const json& pod) {
  return hasText(member(member(member(pod, "metadata"), "labels"), names::kInjectLabel), "true");
}

ShapeOutcome shapePod(json&& pod, const Config& config, const AdmissionContext& context) {
  try {
    return shape(pod, config, context);
  } catch (const json::exception&) {
    // The API server decodes pods before admission, so this means a hand-made
    // request; deny rather than guess, in words (not the library's).
    return deny("unreadable", "the pod could not be read: a field podshaper reads has the wrong type (a hand-made request? "
                "the API server sends pods it has decoded)");
  }
}

ShapeOutcome shapePod(const json& pod, const Config& config, const AdmissionContext& context) {
  ShapeOutcome out = shapePod(json(pod), config, context);
  if (!out.allowed) out.pod = pod;
  return out;
}

}  // namespace podshaper
