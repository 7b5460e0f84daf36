#include "shaping/nvlink.h"

#include <algorithm>

#include "api/names.h"
#include "api/node_labels.h"
#include "api/shm_profile.h"
#include "base/json_util.h"
#include "base/text.h"

namespace podshaper {
namespace {

using json = nlohmann::json;

// A label value is at most 63 bytes.
constexpr std::size_t kMaxLabelValue = 63;


// "NVLink domain d (18 nodes)", "NVLink domains d1 (9 nodes), d2 (9 nodes)": the domains of
// the nodes that could take the pod.
std::string domainsWords(const NodeClass& nodeClass) {
  const auto& domains = nodeClass.nvlinkDomains();
  return std::string(domains.size() == 1 ? "NVLink domain " : "NVLink domains ") +
         someOf(domains, 3, [](const auto& d) { return d.first + " (" + counted(d.second, "node") + ")"; });
}

// The pod's group, its value and in words: the user's podshaper.io/nvlink-group, a
// LeaderWorkerSet's group (each group is one NCCL world), else its controller's job (a Job
// by its own name, not its CronJob's nor podshaper.io/workload's, which name the runs that
// share a profile: two runs at once are two worlds), with a Kubeflow job's replica types
// together (master and workers are one world). nullopt: a pod of no controller.
struct Group {
  std::string value, words;
};
// The user's podshaper.io/nvlink-group (or the one podshaper wrote before, on re-invocation).
std::optional<std::string> ownGroupOf(const json& pod) {
  const json& own = member(labelsOf(pod), names::kNvlinkGroupLabel);
  if (!own.is_string() || own.get_ref<const std::string&>().empty()) return std::nullopt;
  return own.get<std::string>();
}

std::optional<Group> groupOf(const json& pod) {
  const json& labels = labelsOf(pod);
  if (auto own = ownGroupOf(pod)) return Group{*own, std::string(names::kNvlinkGroupLabel) + " " + inQuotes(*own)};
  if (const json& key = member(labels, names::kLwsGroupKeyLabel); key.is_string() && !key.get_ref<const std::string&>().empty()) {
    return Group{withinLength(profileName("leaderworkerset", key.get<std::string>()), kMaxLabelValue),
                 "LeaderWorkerSet group " + inQuotes(key.get<std::string>())};
  }
  auto workload = controllerWorkloadOf(pod);
  if (!workload) return std::nullopt;
  const Workload& w = *workload;
  std::string name = w.name;
  const bool roleIsReplicaType =
      w.kind != "JobSet" && w.kind != "RayCluster" && w.kind != "RayJob" && w.kind != "LeaderWorkerSet";
  if (const std::size_t slash = name.find('/'); roleIsReplicaType && slash != std::string::npos) name.resize(slash);
  Workload job{w.kind, name, profileName(w.kind, name)};
  return Group{withinLength(job.profile, kMaxLabelValue), job.words()};
}

// The gang scheduling the pod is under, in words; nullopt: none recognised.
std::optional<std::string> gangOf(const json& pod) {
  const json& spec = member(pod, "spec");
  for (std::string_view field : {names::kWorkloadRefField, names::kSchedulingGroupField}) {
    if (member(spec, field).is_object()) return "the Workload API (spec." + std::string(field) + ")";
  }
  // Kueue admits the pod set in one domain where the topology is required; preferred may split it.
  if (annotation(pod, names::kKueueRequiredTopology)) {
    return "Kueue's topology-aware scheduling (" + std::string(names::kKueueRequiredTopology) + ")";
  }
  if (annotation(pod, names::kVolcanoGroupName)) return "Volcano (" + std::string(names::kVolcanoGroupName) + ")";
  if (member(labelsOf(pod), names::kCoschedulingPodGroup).is_string()) {
    return "scheduler-plugins' coscheduling (" + std::string(names::kCoschedulingPodGroup) + ")";
  }
  return std::nullopt;
}

// The container is given an IMEX channel without DRA: NVIDIA_IMEX_CHANNELS for the container
// toolkit (not empty, none or void), or a hostPath of the host's channel devices mounted.
bool imexWithoutDra(const json& pod, const json& container) {
  const json& env = member(container, "env");
  if (env.is_array()) {
    for (const json& e : env) {
      if (stringMember(e, "name") != names::kImexChannelsEnv) continue;
      const std::string& value = stringMember(e, "value");
      if (!value.empty() && value != "none" && value != "void") return true;
    }
  }
  const json& mounts = member(container, "volumeMounts");
  if (!mounts.is_array()) return false;
  const json& volumes = member(member(pod, "spec"), "volumes");
  if (!volumes.is_array()) return false;
  const std::string_view dir = names::kImexChannelsHostPath;
  return std::any_of(mounts.begin(), mounts.end(), [&](const json& mount) {
    return std::any_of(volumes.begin(), volumes.end(), [&](const json& volume) {
      if (stringMember(volume, "name") != stringMember(mount, "name")) return false;
      const std::string text = stringMember(member(volume, "hostPath"), "path");
      std::string_view path = text;
      while (path.size() > 1 && path.back() == '/') path.remove_suffix(1);
      return path == dir || (path.starts_with(dir) && path[dir.size()] == '/');
    });
  });
}

// What the pod lacks of an IMEX channel, in words; nullopt where each GPU container uses a
// claim of the channel class, or is given a channel without DRA.
std::optional<std::string> missingChannel(const json& pod, const PodInputs& in, const PodClaimGpus& claims,
                                          const std::string& channelClass) {
  const json& containers = member(member(pod, "spec"), "containers");
  std::vector<std::string> without;
  bool anyWithoutDra = false;
  for (const GpuContainer& c : in.gpuContainers) {
    const json& container = containers[c.index];
    const json& uses = member(member(container, "resources"), "claims");
    const bool usesOne = uses.is_array() && std::any_of(uses.begin(), uses.end(), [&](const json& use) {
                           return claims.channelClaims.contains(stringMember(use, "name"));
                         });
    const bool givenOne = !usesOne && imexWithoutDra(pod, container);
    anyWithoutDra = anyWithoutDra || givenOne;
    if (!usesOne && !givenOne) without.push_back(inQuotes(c.name));
  }
  if (without.empty()) return std::nullopt;
  if (claims.channelClaims.empty()) {
    if (!anyWithoutDra) return "it claims no IMEX channel (no resource claim of device class " + channelClass + ")";
    return "GPU container" + std::string(without.size() == 1 ? " " : "s ") + someOf(without) +
           " claim no IMEX channel (no resource claim of device class " + channelClass + ", no " +
           std::string(names::kImexChannelsEnv) + ", no hostPath " + std::string(names::kImexChannelsHostPath) + ")";
  }
  return "its IMEX channel claim " + inQuotes(*claims.channelClaims.begin()) + " is not used by container" +
         (without.size() == 1 ? " " : "s ") + someOf(without) + " (resources.claims), which then has no channel";
}

std::string channelFix(const std::string& channelClass) {
  return "NCCL would fail at init with ncclSystemError (\"MNNVL ... is available but not working ... Check the IMEX "
         "channel configuration (/dev/nvidia-caps-imex-channels)\", NCCL src/mnnvl.cc). Make a ComputeDomain "
         "(resource.nvidia.com) with spec.channel.resourceClaimTemplate.name: imex-channel, whose driver makes that "
         "ResourceClaimTemplate (a request of deviceClassName " + channelClass + "), and give the pod "
         "spec.resourceClaims: [{name: imex-channel, resourceClaimTemplateName: imex-channel}] and each GPU "
         "container resources.claims: [{name: imex-channel}]; or set " + std::string(names::kNcclMnnvlEnableEnv) +
         "=0 in its GPU containers for NCCL to use the network between nodes; or, for a one-node job, set " +
         std::string(names::kNnodesEnv) + "=1 (or torchrun --standalone)";
}

}  // namespace

Result<NvlinkPlan, Denial> planNvlink(const json& pod, const PodInputs& in, const NodeClass& nodeClass,
                                      const PodClaimGpus& claims, const MnnvlSettings& settings) {
  NvlinkPlan out;
  const bool oneNode = in.span.kind == JobSpan::kOneNode;
  if (!nodeClass.mnnvl()) {
    // Some of its nodes in a domain, some in none (a fabric still registering, or nodes of
    // another kind alike in size): shaped as for nodes without a fabric, which is said.
    if (!nodeClass.nvlinkDomains().empty() && !oneNode && in.ncclCommunicators > 0) {
      std::size_t inDomains = 0;
      for (const auto& [domain, nodes] : nodeClass.nvlinkDomains()) inDomains += nodes;
      out.warnings.push_back(
          counted(inDomains, "node") + " that could take the pod " + (inDomains == 1 ? "is" : "are") + " in " +
          domainsWords(nodeClass) + " and " + counted(nodeClass.withoutNvlinkDomain, "node") + " in none (a " +
          "fabric still registering, or nodes without one): it is shaped as for nodes without a fabric, not kept "
          "in one domain, with the NET reserve; where it lands in a domain NCCL needs an IMEX channel (a claim of "
          "device class " + settings.computeDomainChannelClass + ") or " + std::string(names::kNcclMnnvlEnableEnv) +
          "=0 in its GPU containers");
    }
    return out;
  }
  const std::string domains = domainsWords(nodeClass);

  // NCCL checks the fabric where its ranks span nodes, MNNVL is on and cuMem with it.
  bool channelMissing = false;
  if (!oneNode && in.ncclCommunicators > 0 && in.ncclEnv.mnnvlOffWhy().empty()) {
    const std::string& channelClass = settings.computeDomainChannelClass;
    if (!claims.read) {
      out.warnings.push_back("the pod's nodes are in " + domains +
                             ", and whether it claims an IMEX channel (device class " + channelClass +
                             ") was not checked: its resource claims were not read");
    } else if (auto missing = missingChannel(pod, in, claims, channelClass)) {
      channelMissing = true;
      if (in.span.kind != JobSpan::kManyNodes) {
        // NCCL checks the fabric only where the ranks span nodes, which the pod does not say.
        out.warnings.push_back("the pod's nodes are in " + domains + " and " + *missing +
                               ": if its job spans nodes, " + channelFix(channelClass) + ". Its span is not known (" +
                               in.span.source + ")");
      } else {
        std::string message = "the pod's nodes are in " + domains + " and its ranks span nodes (" + in.span.source +
                              "), but " + *missing + ": " + channelFix(channelClass);
        if (settings.missingChannel == MissingChannelAction::kDeny) {
          return makeDenial(DenialCause::kNvlinkChannel, std::move(message));
        }
        out.warnings.push_back(std::move(message) + " (config mnnvl.missingChannel: warn)");
      }
    }
  }

  // One pod per node: the job's pods are kept in one domain. A one-node job has no other pod,
  // and a pod that runs no NCCL has no world to keep together.
  if (!in.nodeExclusive || oneNode || in.ncclCommunicators == 0) return out;
  std::size_t largest = 0;
  for (const auto& [domain, nodes] : nodeClass.nvlinkDomains()) largest = std::max(largest, nodes);
  if (in.span.nodes && *in.span.nodes > largest) {
    out.warnings.push_back("the job spans " + counted(*in.span.nodes, "node") + " (" + in.span.source +
                           "), more than any NVLink domain of its nodes holds (" + domains +
                           "): its pods are not kept in one domain, and its ranks reach each other over the network "
                           "between domains (the NET reserve)");
    return out;
  }
  // Only pods known to be one NCCL world across nodes are held together: the replicas of a
  // Deployment, each its own world, would all be held to the domain of the first.
  if (in.span.kind != JobSpan::kManyNodes && !ownGroupOf(pod)) {
    out.warnings.push_back("the pod's job is not kept in one of the " + domains + " because it does not say it "
                           "spans nodes (" + in.span.source + "), and its ranks may reach each other over the network "
                           "(the NET reserve): set " + std::string(names::kNnodesEnv) + " or torchrun --nnodes, or "
                           "label the job's pods " + std::string(names::kNvlinkGroupLabel) + " with one value");
    return out;
  }
  auto group = groupOf(pod);
  if (!group) {
    out.warnings.push_back("the pod belongs to no workload (no controller): nothing keeps its job in one of the " +
                           domains + ", and its ranks may reach each other over the network (the NET reserve); "
                           "label the job's pods " + std::string(names::kNvlinkGroupLabel) +
                           " with one value to keep them together");
    return out;
  }
  // The scheduler counts a pod of the group only if it matches every required term, and the
  // first pod only if it matches its own: the group term with another would hold the pod to
  // the other term's pods, or leave it unschedulable.
  if (settings.placement == NvlinkPlacement::kRequired) {
    const json own = nvlinkGroupTerm(group->value);
    const json& terms = member(member(member(member(pod, "spec"), "affinity"), "podAffinity"),
                               "requiredDuringSchedulingIgnoredDuringExecution");
    if (terms.is_array() && std::any_of(terms.begin(), terms.end(), [&](const json& t) { return t != own; })) {
      out.warnings.push_back("the pod has required podAffinity terms of its own, which every pod of the group "
                             "would have to match as well: " + group->words + " is not kept in one of the " +
                             domains + ", and its ranks may reach each other over the network (the NET reserve)");
      return out;
    }
  }
  out.group = group->value;
  out.required = settings.placement == NvlinkPlacement::kRequired;
  if (!out.required) return out;  // preferred: the scheduler may spread it, so the ranks may leave the domain
  if (!gangOf(pod)) {
    out.warnings.push_back(
        "no gang scheduling recognised (the Workload API's spec.workloadRef, Kueue's " +
        std::string(names::kKueueRequiredTopology) + ", Volcano's " + std::string(names::kVolcanoGroupName) +
        ", scheduler-plugins' " + std::string(names::kCoschedulingPodGroup) + "): the first pod of " + group->words +
        " picks an NVLink domain and the others must join it, so one with fewer free nodes than the job needs "
        "leaves them Pending (" + domains + ")");
  }
  if (!channelMissing) {
    out.keptWithin = nodeClass.nvlinkDomains().size() == 1 ? domains : "one of the " + domains;
  }
  return out;
}

void keepInNvlinkDomain(JsonEdit& edit, const NvlinkPlan& plan) {
  if (!plan.group) return;
  if (!hasText(member(labelsOf(edit.document()), names::kNvlinkGroupLabel), *plan.group)) {
    edit.set({"metadata", "labels", names::kNvlinkGroupLabel}, *plan.group);
  }
  // Without a namespaceSelector the term sees the pods of the pod's own namespace, as a
  // workload's are.
  json term = nvlinkGroupTerm(*plan.group);
  json entry = plan.required ? std::move(term) : json{{"weight", 100}, {"podAffinityTerm", std::move(term)}};
  const char* list = plan.required ? "requiredDuringSchedulingIgnoredDuringExecution"
                                   : "preferredDuringSchedulingIgnoredDuringExecution";
  const json& terms = member(member(member(edit.document(), "spec"), "affinity"), "podAffinity");
  const json& written = member(terms, list);
  if (!written.is_array() || std::find(written.begin(), written.end(), entry) == written.end()) {
    edit.append({"spec", "affinity", "podAffinity", list}, std::move(entry));
  }
}

}  // namespace podshaper
