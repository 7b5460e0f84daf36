#include "shaping/pod_shaper.h"

#include <algorithm>
#include <iterator>
#include <optional>

#include "api/names.h"
#include "base/checked.h"
#include "base/json_edit.h"
#include "base/json_util.h"
#include "base/quantity.h"
#include "base/text.h"
#include "shaping/measured_shm.h"
#include "shaping/memlock_pod.h"
#include "shaping/node_class.h"
#include "shaping/nvlink.h"
#include "shaping/placement.h"
#include "shaping/pod_inputs.h"
#include "shaping/pod_shm.h"
#include "shaping/privileges.h"
#include "shaping/request_limits.h"
#include "shaping/shm.h"

namespace podshaper {
namespace {

using json = nlohmann::json;

// What podshaper says, it says under its name: the denial's message and each warning of
// the create response (the podshaper.io/warnings annotation lists them without it).
constexpr std::string_view kSignature = "podshaper: ";

ShapeOutcome unchanged(json& pod, std::vector<std::string> warnings = {}) {
  ShapeOutcome out;
  out.pod = std::move(pod);
  out.warnings = std::move(warnings);
  return out;
}

// Without the pod: shapePod(const json&) puts the one it was given back.
ShapeOutcome deny(DenialCause cause, std::string message) {
  ShapeOutcome out;
  out.allowed = false;
  out.cause = cause;
  out.message = std::string(kSignature) + std::move(message);
  return out;
}
ShapeOutcome deny(const Denial& denial) { return deny(denial.cause, denial.message); }

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
  const MemlockLimit& memlock;  // config memlock
  uint64_t ranks = 0;
  // podshaper's /dev/shm volume and the GPUs of the containers that mount it: the pod's
  // size when every GPU container does, else their share of it (docs/webhook.md
  // "Several GPU containers"); the user's own /dev/shm volumes, kept or adopted (config
  // shm.adoptOwnVolume).
  const PodShm& shm;
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
  return raiseForShm(edit, at, c, shareOf(p.shm.volume.bytes, c.gpus, p.shm.volume.gpus));
}

// A volume of the user's: kept as written, or adopted, its containers' memory raised as
// for podshaper's own volume (by their share of the sizeLimit set, all of it).
Result<void> keepOwnShm(JsonEdit& edit, const ContainerAt& at, const GpuContainer& c, const PodShape& p) {
  for (const OwnShm& own : p.shm.owns) {
    if (own.volume.name != *c.ownShmVolume || !own.adopted) continue;
    return raiseForShm(edit, at, c, shareOf(own.needBytes, c.gpus, own.gpus));
  }
  return {};
}

// torchrun in each container starts its share of the pod's ranks; the warning when a value
// the user set was changed.
std::optional<std::string> setNprocs(JsonEdit& edit, const ContainerAt& at, const GpuContainer& c, const PodShape& p,
                                     bool expandedHere) {
  const json& env = member(at.container, "env");
  std::string nprocs = std::to_string(mulDivCeil(p.ranks, c.gpus, p.in.podGpus).value_or(p.ranks));
  auto isNproc = [](const json& e) { return hasText(member(e, "name"), names::kNprocEnv); };
  const auto nproc = env.is_array() ? std::find_if(env.begin(), env.end(), isNproc) : env.end();
  if (nproc == env.end()) {
    edit.append({"spec", "containers", at.index, "env"},
                jsonObject("name", names::kNprocEnv, "value", std::move(nprocs)));
  } else if (expandedHere && !hasText(member(*nproc, "value"), nprocs)) {
    std::string warning = "container \"" + c.name + "\": " + std::string(names::kNprocEnv) + " set to " + nprocs +
                          " for the expanded GPU count";
    edit.set({"spec", "containers", at.index, "env", static_cast<std::size_t>(nproc - env.begin()), "value"}, nprocs);
    return warning;
  }
  return std::nullopt;
}

enum class ShmMount {
  kPodsVolume,  // podshaper's /dev/shm volume
  kItsOwn,      // a /dev/shm volume of the user's, kept
};

// A shaped container's /dev/shm, and the warnings shaping it gave, in order.
struct ShapedContainer {
  ShmMount mount = ShmMount::kItsOwn;
  std::vector<std::string> warnings;
};

// One GPU container: its GPUs if expanded, /dev/shm and memory, IPC_LOCK, memlock,
// its ranks.
Result<ShapedContainer> shapeContainer(JsonEdit& edit, const GpuContainer& c, const PodShape& p) {
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
  ShapedContainer out;
  if (c.ownShmVolume) {
    auto kept = keepOwnShm(edit, at, c, p);
    if (!kept) return kept.error();
  } else {
    auto mounted = mountShm(edit, at, c, p);
    if (!mounted) return mounted.error();
    out.mount = ShmMount::kPodsVolume;
  }
  const bool privileged = p.privileges == Privileges::kGranted;
  if (privileged) {
    const json& add = member(member(member(at.container, "securityContext"), "capabilities"), "add");
    if (!add.is_array() || std::find(add.begin(), add.end(), names::kIpcLock) == add.end()) {
      edit.append({"spec", "containers", c.index, "securityContext", "capabilities", "add"}, names::kIpcLock);
    }
  }
  const json& annotations = member(member(edit.document(), "metadata"), "annotations");
  MemlockAnnotation memlock = memlockAnnotation(annotations, c.name, p.memlock);
  if (memlock.set) edit.set({"metadata", "annotations", memlock.set->first}, memlock.set->second);
  if (memlock.warning) out.warnings.push_back(*memlock.warning);
  if (privileged) {
    if (auto nonRoot = nonRootMemlockWarning(c, memlock, p.memlock)) out.warnings.push_back(std::move(*nonRoot));
  }
  if (auto nprocs = setNprocs(edit, at, c, p, expandedHere)) out.warnings.push_back(std::move(*nprocs));
  // The log's tail becomes the termination message when the container fails, so that a
  // DataLoader's "Bus error" or NCCL's "No space left on device" reach the pod's status
  // (the operator reads them there: docs/operator.md "Shaped pods explain themselves").
  // The API server fills in File before admission, so File counts as not chosen; a
  // message file the container writes still wins over its logs.
  if (const json& policy = member(at.container, "terminationMessagePolicy");
      policy.is_null() || hasText(policy, "File")) {
    edit.set({"spec", "containers", c.index, "terminationMessagePolicy"}, names::kFallbackToLogsOnError);
  }
  return out;
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

// The steps in order, each given the part of the config it reads; the warnings they
// return are collected here, in the order the steps told them.
ShapeOutcome shape(json& pod, const Config& config, const AdmissionContext& ctx) {
  if (!pod.is_object() || !pod.contains("spec")) return deny(DenialCause::kNotAPod, "the object is not a Pod");
  if (!optedIn(pod) || namespaceOptedOut(ctx) || alreadyShaped(pod)) return unchanged(pod);
  if (auto sized = checkPodSize(pod); !sized) return deny(DenialCause::kLimits, sized.error().message);

  auto claims =
      readPodClaimGpus(pod, ctx.namespaceName, config.gpuDeviceClass, ctx.claims, config.mnnvl.computeDomainChannelClass);
  if (!claims) return deny(DenialCause::kClaims, claims.error().message);
  auto read = readPodInputs(pod, config.podDefaults, *claims);
  if (!read) return deny(DenialCause::kInput, read.error().message);
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
                                         in.requestedNodeGpus, in.nodeExclusive, config.node, ctx.cluster);
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
  auto fit = fitNodeClass(in, nodeClass, config.node.partialNode);
  if (!fit) return deny(DenialCause::kNodeSize, fit.error().message);
  warnings.insert(warnings.end(), fit->warnings.begin(), fit->warnings.end());
  uint64_t ranks = in.ranks.value_or(in.podGpus);
  if (!in.ranks) {
    warnings.push_back(std::string(names::kRanksPerPod) + " not set: using " + std::to_string(ranks) + ", the pod's " +
                       in.gpuWords);
  }
  auto privileges = decidePrivileges(ctx, config.podSecurity);
  if (!privileges) return deny(DenialCause::kPodSecurity, privileges.error().message);
  if (privileges->warning) warnings.push_back(*privileges->warning);
  // The workload's ShmProfile, where its earlier runs were measured.
  auto profile = podProfile(pod, ranks, config.shm, ctx);
  if (!profile) return deny(DenialCause::kInput, profile.error().message);
  warnings.insert(warnings.end(), profile->warnings.begin(), profile->warnings.end());
  // Nodes in multi-node NVLink domains: the job kept in one, its IMEX channel checked.
  auto nvlink = planNvlink(pod, in, nodeClass, *claims, config.mnnvl);
  if (!nvlink) return deny(nvlink.error());
  warnings.insert(warnings.end(), nvlink->warnings.begin(), nvlink->warnings.end());
  auto decided = decidePodShm(pod, in, ranks, nodeClass, config.shm, nvlink->keptWithin,
                              profile->measured ? &*profile->measured : nullptr);
  if (!decided) return deny(decided.error());
  const PodShm& shm = *decided;
  warnings.insert(warnings.end(), shm.warnings.begin(), shm.warnings.end());

  const PodShape shapeOf{in, config.node.memlock, ranks, shm, fit->fit, privileges->privileges};
  // What the pod's node must be (api/node_labels.h), with its JSON text: the thread's kept
  // one where the caller keeps it.
  NodeRequirementsText made;
  const auto& nodeRequirements = (ctx.nodeRequirements != nullptr ? *ctx.nodeRequirements : made)
                                     .of({config.node.memlock,
                                          in.nodeExclusive ? std::optional(nodeClass.gpus) : std::nullopt,
                                          // P2P between the pod's own ranks; one rank's is over the fabric
                                          ranks > 1 && shm.plan.ncclTransport == NcclTransport::kP2P});
  const std::string shmText = formatBytes(static_cast<int64_t>(shm.volume.bytes));
  // From here on the pod is changed where it lies, each change written down as the patch.
  const std::size_t annotationsBefore = annotationsBytes(pod);
  JsonEdit edit(pod);
  bool needVolume = false;
  for (const GpuContainer& c : in.gpuContainers) {
    auto shaped = shapeContainer(edit, c, shapeOf);
    if (!shaped) return deny(DenialCause::kContainer, shaped.error().message);
    needVolume = needVolume || shaped->mount == ShmMount::kPodsVolume;
    warnings.insert(warnings.end(), std::make_move_iterator(shaped->warnings.begin()),
                    std::make_move_iterator(shaped->warnings.end()));
  }
  for (const OwnShm& own : shm.owns) {
    if (auto warning = ownShmWarning(pod, own)) warnings.push_back(std::move(*warning));
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
  if (privileges->privileges == Privileges::kGranted) edit.set({"spec", "hostIPC"}, true);
  if (auto placed = placePod(edit, in, nodeClass, nodeRequirements); !placed) {
    return deny(DenialCause::kPlacement, placed.error().message);
  }
  keepInNvlinkDomain(edit, *nvlink);

  // shm-size is the /dev/shm the pod will have: podshaper's volume's, else a kept
  // volume's sizeLimit; none for a volume without one, the host's, or one of several.
  std::optional<std::string> shmSize;
  std::string formula = shm.plan.formula;
  if (shm.owns.empty()) {
    shmSize = shmText;
  } else {
    formula += " needed";
    if (shm.volume.gpus > 0) {
      shmSize = shmText;
      formula += "; podshaper's /dev/shm serves the containers holding " + std::to_string(shm.volume.gpus) +
                 " of the pod's " + counted(in.podGpus, "GPU") + ": " + shmText;
    } else if (shm.owns.size() == 1) {
      shmSize = shm.owns.front().size();
    }
    for (const OwnShm& own : shm.owns) formula += "; " + ownShmWords(own, in);
  }
  if (shmSize) edit.set({"metadata", "annotations", names::kShmSize}, *shmSize);
  else edit.erase({"metadata", "annotations", names::kShmSize});
  edit.set({"metadata", "annotations", names::kShmFormula}, formula);
  if (profile->profiled) edit.set({"metadata", "annotations", names::kShmProfile}, profile->profiled->annotation());
  else edit.erase({"metadata", "annotations", names::kShmProfile});
  edit.set({"metadata", "annotations", names::kShapedBy},
           ctx.shaperVersion + " config=" + (ctx.configHash.empty() ? config.hash() : std::string(ctx.configHash)));
  // What podshaper told at admission, and nothing a user wrote under its name.
  if (!warnings.empty()) edit.set({"metadata", "annotations", names::kWarnings}, warningsAnnotation(warnings));
  else edit.erase({"metadata", "annotations", names::kWarnings});
  edit.set({"metadata", "labels", names::kShapedLabel}, "true");
  if (auto fit = fitAnnotations(annotationsBefore, edit); !fit) return deny(DenialCause::kLimits, fit.error().message);

  ShapeOutcome out;
  out.patch = edit.patch();
  out.pod = std::move(pod);
  out.warnings = std::move(warnings);
  return out;
}

}  // namespace

// The MutatingWebhookConfiguration's objectSelector sends only labelled pods;
// checking again keeps a misconfigured registration from shaping other pods.
bool optedIn(const json& pod) {
  return hasText(member(member(member(pod, "metadata"), "labels"), names::kInjectLabel), "true");
}

ShapeOutcome shapePod(json&& pod, const Config& config, const AdmissionContext& context) {
  ShapeOutcome out;
  try {
    out = shape(pod, config, context);
  } catch (const json::exception&) {
    // The API server decodes pods before admission, so this means a hand-made
    // request; deny rather than guess, in words (not the library's).
    return deny(DenialCause::kUnreadable,
                "the pod could not be read: a field podshaper reads has the wrong type (a hand-made request? "
                "the API server sends pods it has decoded)");
  }
  for (std::string& w : out.warnings) w.insert(0, kSignature);
  return out;
}

ShapeOutcome shapePod(const json& pod, const Config& config, const AdmissionContext& context) {
  ShapeOutcome out = shapePod(json(pod), config, context);
  if (!out.allowed) out.pod = pod;
  return out;
}

}  // namespace podshaper
