#include "operator/caches.h"

#include <algorithm>

#include "api/names.h"
#include "api/shm_volume.h"
#include "base/json_util.h"
#include "base/text.h"
#include "judging/rejected_by_kubelet.h"

namespace podshaper::op {

using nlohmann::json;

// What the caches keep (informer transforms). At 5,000 nodes the full objects
// took ~680 MiB: every report's spec as a tree of small JSON values, and
// managedFields mirroring it; Nodes with their images and conditions.
void compactReport(json& report) {
  if (!report.is_object()) return;
  if (report.contains("metadata") && report["metadata"].is_object()) report["metadata"].erase("managedFields");
  // The spec is read once per judgement: kept as its text, parsed then (reportSpecOf).
  if (report.contains("spec") && !report["spec"].is_string()) report["spec"] = report["spec"].dump();
}

namespace {
// The most of a failed pod's status.message kept: more than the Event quotes.
constexpr std::size_t kMaxKeptRejectionBytes = 1024;
}  // namespace

void compactPod(json& pod) {
  if (!pod.is_object()) return;
  json kept = {{"metadata", json::object()}, {"spec", json::object()}, {"status", json::object()}};
  const json& m = member(pod, "metadata");
  for (const char* k : {"name", "namespace", "uid", "creationTimestamp", "deletionTimestamp", "labels",
                        "ownerReferences"}) {
    if (m.contains(k)) kept["metadata"][k] = m[k];
  }
  // The ShmProfile's pods: their profile (with ranks and inputs), their /dev/shm's size, and
  // the workload whose words the profile says.
  for (std::string_view k : {names::kShmSize, names::kShmFormula, names::kShmProfile, names::kWorkload}) {
    if (auto v = annotation(pod, k)) kept["metadata"]["annotations"][std::string(k)] = *v;
  }
  const json& spec = member(pod, "spec");
  for (const char* k : {"nodeName", "nodeSelector", "tolerations", "schedulingGates"}) {
    if (spec.contains(k)) kept["spec"][k] = spec[k];
  }
  if (const json& na = member(member(spec, "affinity"), "nodeAffinity"); !na.is_null()) {
    kept["spec"]["affinity"]["nodeAffinity"] = na;
  }
  // The required podAffinity terms on the NVLink domain: which job's domain the pod must join.
  for (const json& term : member(member(member(spec, "affinity"), "podAffinity"), "requiredDuringSchedulingIgnoredDuringExecution")) {
    if (hasText(member(term, "topologyKey"), names::kNvlinkDomain)) {
      kept["spec"]["affinity"]["podAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"].push_back(term);
    }
  }
  // Each container's /dev/shm mount and its volume: a ShmExhausted Event names the
  // /dev/shm the container had (podshaper's, or one of the user's with its size).
  for (const char* list : {"containers", "initContainers"}) {
    const json& containers = member(spec, list);
    if (!containers.is_array()) continue;
    for (const json& c : containers) {
      auto mount = shmMountOf(c);
      if (!mount) continue;
      json shmMount = json::object();
      shmMount["name"] = *mount;
      shmMount["mountPath"] = std::string(names::kShmMountPath);
      json keptContainer = json::object();
      keptContainer["name"] = member(c, "name");
      keptContainer["volumeMounts"] = json::array();
      keptContainer["volumeMounts"].push_back(std::move(shmMount));
      kept["spec"][list].push_back(std::move(keptContainer));
      const json& volumes = member(spec, "volumes");
      const ShmVolumeInfo volume = shmVolumeInfo(pod, *mount);
      if (volume.kind == ShmVolumeInfo::Kind::kMissing) continue;
      json& keptVolumes = kept["spec"]["volumes"];
      if (!keptVolumes.is_array() || std::none_of(keptVolumes.begin(), keptVolumes.end(),
                                                  [&](const json& v) { return hasText(member(v, "name"), *mount); })) {
        keptVolumes.push_back(volumes[volume.index]);
      }
    }
  }
  const json& status = member(pod, "status");
  if (status.contains("phase")) kept["status"]["phase"] = status["phase"];
  // A pod the kubelet failed at admission: a RejectedByKubelet Event quotes why
  // (judging/rejected_by_kubelet.h).
  if (const json& reason = member(status, "reason"); reason.is_string() && isAdmissionFailure(reason.get<std::string>())) {
    kept["status"]["reason"] = status["reason"];
    kept["status"]["message"] = cutUtf8(stringMember(status, "message"), kMaxKeptRejectionBytes);
  }
  for (const json& c : member(status, "conditions")) {
    if (stringMember(c, "type") == "PodScheduled") kept["status"]["conditions"].push_back(c);
  }
  for (const char* list : {"initContainerStatuses", "containerStatuses"}) {
    for (const json& cs : member(status, list)) {
      json c = {{"name", member(cs, "name")}, {"restartCount", member(cs, "restartCount")}};
      for (const char* state : {"state", "lastState"}) {
        if (const json& t = member(member(cs, state), "terminated"); !t.is_null()) c[state]["terminated"] = t;
      }
      // A container podshaper-shm holds back because the node did not apply its memlock
      // (judging/memlock_held.h); other waits are not kept, so that they change nothing here.
      const json& waiting = member(member(cs, "state"), "waiting");
      if (stringMember(waiting, "message").find(names::kMemlockNotAppliedMarker) != std::string::npos) {
        c["state"]["waiting"] = {{"reason", member(waiting, "reason")}, {"message", member(waiting, "message")}};
      }
      kept["status"][list].push_back(std::move(c));
    }
  }
  pod = std::move(kept);
}

void compactShmUsage(json& usage) {
  if (!usage.is_object()) return;
  json kept = {{"metadata", json::object()}, {"spec", json::object()}};
  const json& m = member(usage, "metadata");
  for (const char* k : {"name", "namespace", "resourceVersion"}) {
    if (m.contains(k)) kept["metadata"][k] = m[k];
  }
  const json& spec = member(usage, "spec");
  for (const char* k : {"podUID", "nodeName", "volume", "userVolume"}) {
    if (spec.contains(k)) kept["spec"][k] = spec[k];
  }
  // Of its runs, those that ended: the open run's samples (every 30 s at most) then change
  // nothing here and queue nothing.
  const json& runs = member(member(usage, "status"), "runs");
  if (!runs.is_array()) {
    if (!runs.is_null()) kept["status"]["runs"] = runs;  // malformed: kept, for the reader to refuse
  } else {
    kept["status"]["runs"] = json::array();
    for (const json& run : runs) {
      if (!run.is_object() || !member(run, "endedAt").is_null()) kept["status"]["runs"].push_back(run);
    }
  }
  usage = std::move(kept);
}

void compactShmProfile(json& profile) {
  if (!profile.is_object()) return;
  json kept = {{"metadata", json::object()}};
  const json& m = member(profile, "metadata");
  for (const char* k : {"name", "namespace"}) {
    if (m.contains(k)) kept["metadata"][k] = m[k];
  }
  profile = std::move(kept);
}

void compactNode(json& node) {
  if (!node.is_object()) return;
  json kept = {{"metadata", json::object()}};
  const json& m = member(node, "metadata");
  for (const char* k : {"name", "uid", "resourceVersion", "labels"}) {
    if (m.contains(k)) kept["metadata"][k] = m[k];
  }
  if (const json& taints = member(member(node, "spec"), "taints"); !taints.is_null()) kept["spec"]["taints"] = taints;
  if (member(member(node, "spec"), "unschedulable") == true) kept["spec"]["unschedulable"] = true;
  for (const json& c : member(member(node, "status"), "conditions")) {  // podshaper's own, not the kubelet's
    if (stringMember(c, "type") == names::kNodeCondition) kept["status"]["conditions"] = json::array({c});
  }
  if (const json& alloc = member(member(node, "status"), "allocatable"); !alloc.is_null()) {
    kept["status"]["allocatable"] = alloc;
  }
  node = std::move(kept);
}

}  // namespace podshaper::op
