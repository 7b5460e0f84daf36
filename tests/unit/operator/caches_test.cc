// What the operator's caches keep of each object (operator/caches.h) is all its readers
// read: each reader, given the object as the API server sends it and as the cache keeps
// it, answers the same. A reader that starts to read a field its transform drops fails here.
#include "operator/caches.h"

#include <gtest/gtest.h>

#include "api/node_labels.h"
#include "judging/memlock_held.h"
#include "judging/node_facts.h"
#include "judging/pending.h"
#include "judging/plan.h"
#include "judging/rejected_by_kubelet.h"
#include "judging/shm_exhausted.h"
#include "judging/shm_profile_plan.h"
#include "tests/unit/judging/verdict_builder.h"

namespace podshaper::op {
namespace {

template <typename Transform>
json kept(json object, Transform transform) {
  transform(object);
  return object;
}

// A Node as a kubelet and the operator leave it: more than any reader reads.
json fullNode(const std::string& validated, const std::string& taintEffect) {
  json node = nodeObject(8, "20", {{"podshaper.io/topology-validated", validated}, {"nvidia.com/gpu.product", "H100"}});
  node["metadata"]["managedFields"] = {{{"manager", "kubelet"}, {"operation", "Update"}}};
  node["metadata"]["annotations"] = {{"node.alpha.kubernetes.io/ttl", "0"}};
  node["spec"] = {{"podCIDR", "10.0.0.0/24"}, {"unschedulable", true}};
  if (!taintEffect.empty()) {
    node["spec"]["taints"] = {{{"key", "podshaper.io/topology-not-validated"}, {"value", "P2PUnavailable"},
                               {"effect", taintEffect}}};
  }
  node["status"]["capacity"] = {{"memory", "2Ti"}, {"nvidia.com/gpu", "8"}};
  node["status"]["conditions"] = {
      {{"type", "Ready"}, {"status", "True"}, {"lastHeartbeatTime", "2026-11-22T00:00:00Z"}},
      {{"type", "GPUTopologyValidated"}, {"status", "False"}, {"reason", "P2PUnavailable"}, {"message", "m"},
       {"lastTransitionTime", "2026-11-21T00:00:00Z"}}};
  node["status"]["images"] = {{{"names", {"pytorch:2.11"}}, {"sizeBytes", 9000000000}}};
  return node;
}

TEST(Caches, AKeptNodeIsJudgedAsTheWholeOne) {
  Policy tainting = defaultPolicy();
  tainting.requirements.taintEffect = "NoSchedule";
  const std::vector<Policy> policies = {tainting};
  for (const char* validated : {"true", "false"}) {
    for (const char* effect : {"", "NoSchedule"}) {
      for (const auto& spec : {TopologyBuilder(8).spec(), TopologyBuilder(8).pair(0, 1, "NV18", "NS").spec()}) {
        const json report = reportObject(spec);
        const json full = fullNode(validated, effect);
        const json node = kept(full, compactNode);
        const Plan a = plan({.report = &report, .node = &full, .policies = &policies, .now = kNow});
        const Plan b = plan({.report = &report, .node = &node, .policies = &policies, .now = kNow});
        EXPECT_EQ(a.statusPatch, b.statusPatch);
        EXPECT_EQ(a.nodePatch, b.nodePatch) << validated << effect;
        EXPECT_EQ(a.nodeStatusPatch, b.nodeStatusPatch) << validated << effect;
        ASSERT_EQ(a.events.size(), b.events.size());
        for (std::size_t i = 0; i < a.events.size(); ++i) EXPECT_EQ(a.events[i].event.message, b.events[i].event.message);
        EXPECT_EQ(a.requeueAfter, b.requeueAfter);

        StringPool pool;
        const NodeFacts f = nodeFactsOf(full, &report, pool), g = nodeFactsOf(node, &report, pool);
        EXPECT_EQ(f.node.name, g.node.name);
        EXPECT_EQ(f.node.uid, g.node.uid);
        EXPECT_EQ(f.node.labels, g.node.labels);
        EXPECT_EQ(f.node.taints, g.node.taints);
        EXPECT_EQ(f.node.unschedulable, g.node.unschedulable);
        EXPECT_EQ(f.node.allocatableGpus, g.node.allocatableGpus);
        EXPECT_EQ(f.notValidatedReason, g.notValidatedReason);
      }
    }
  }
}

TEST(Caches, AKeptReportIsJudgedAsTheWholeOne) {
  const std::vector<Policy> policies = {defaultPolicy()};
  json full = reportObject(TopologyBuilder(8).pair(2, 5, "NV18", "NS").spec());
  full["metadata"]["managedFields"] = {{{"manager", "podshaper-agent"}}};
  const json report = kept(full, compactReport);
  const json node = nodeObject(8);
  const Plan a = plan({.report = &full, .node = &node, .policies = &policies, .now = kNow});
  const Plan b = plan({.report = &report, .node = &node, .policies = &policies, .now = kNow});
  EXPECT_EQ(a.statusPatch, b.statusPatch);
  EXPECT_EQ(a.nodeStatusPatch, b.nodeStatusPatch);
  EXPECT_EQ(a.requeueAfter, b.requeueAfter);
}

// A shaped pod as the API server sends it, waiting or dead of a full /dev/shm.
json fullPod(bool scheduled, const std::string& volume) {
  json pod = json::parse(R"({
    "apiVersion": "v1", "kind": "Pod",
    "metadata": {
      "name": "train-0", "namespace": "ml", "uid": "uid-1", "resourceVersion": "7",
      "creationTimestamp": "2026-11-21T23:50:00Z",
      "labels": {"podshaper.io/shaped": "true", "podshaper.io/placement": "node-exclusive"},
      "annotations": {"podshaper.io/shm-size": "7053Mi", "podshaper.io/shm-formula": "8 ranks = 7053Mi",
                      "podshaper.io/warnings": "w", "kubectl.kubernetes.io/last-applied-configuration": "{}"},
      "ownerReferences": [{"apiVersion": "batch/v1", "kind": "Job", "name": "train", "uid": "job-uid",
                           "controller": true}],
      "managedFields": [{"manager": "kube-controller-manager"}]
    },
    "spec": {
      "nodeSelector": {"pool": "a"},
      "tolerations": [{"key": "podshaper.io/topology-not-validated", "operator": "Exists"}],
      "affinity": {
        "nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
          {"matchExpressions": [{"key": "podshaper.io/topology-validated", "operator": "In", "values": ["true"]}]}]}},
        "podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": []}
      },
      "containers": [{
        "name": "trainer", "image": "pytorch",
        "env": [{"name": "PET_NNODES", "value": "1"}],
        "resources": {"limits": {"nvidia.com/gpu": "8", "memory": "100Gi"}},
        "volumeMounts": [{"name": "data", "mountPath": "/data"}, {"name": "SHM", "mountPath": "/dev/shm"}]
      }],
      "volumes": [{"name": "data", "persistentVolumeClaim": {"claimName": "data"}},
                  {"name": "SHM", "emptyDir": {"medium": "Memory", "sizeLimit": "1Gi"}}]
    },
    "status": {"phase": "Pending"}
  })");
  pod["spec"]["containers"][0]["volumeMounts"][1]["name"] = volume;
  pod["spec"]["volumes"][1]["name"] = volume;
  if (!scheduled) {
    pod["status"]["conditions"] = {{{"type", "PodScheduled"}, {"status", "False"}, {"reason", "Unschedulable"},
                                    {"message", "0/3 nodes are available."},
                                    {"lastTransitionTime", "2026-11-21T23:50:01Z"}},
                                   {{"type", "Ready"}, {"status", "False"}}};
    return pod;
  }
  pod["spec"]["nodeName"] = "gpu-0";
  pod["status"]["phase"] = "Running";
  json cs = {{"name", "trainer"}, {"restartCount", 1}, {"ready", false}, {"image", "pytorch"}, {"imageID", "sha"}};
  cs["lastState"]["terminated"] = {
      {"exitCode", 1}, {"reason", "Error"},
      {"message", "NCCL WARN Error while creating shared memory segment /dev/shm/nccl-4PshbB (size 34210176), error: "
                  "No space left on device (28)"}};
  cs["state"]["terminated"] = {{"exitCode", 1}, {"reason", "Error"}, {"message", std::string(2040, 'x')}};
  pod["status"]["containerStatuses"] = {cs};
  return pod;
}

TEST(Caches, AKeptPodIsExplainedAsTheWholeOne) {
  NodeFacts node;
  node.node = nodeFromJson(fullNode("false", "NoSchedule"));
  for (const char* volume : {"podshaper-dshm", "dshm"}) {
    for (bool scheduled : {false, true}) {
      const json full = fullPod(scheduled, volume);
      const json pod = kept(full, compactPod);
      const PendingJudgement a = judgePending(full, {node}, kNow, 30), b = judgePending(pod, {node}, kNow, 30);
      EXPECT_EQ(a.pending, b.pending);
      EXPECT_EQ(a.answer, b.answer);
      EXPECT_EQ(a.lookAgainAfter, b.lookAgainAfter);
      EXPECT_EQ(waitsToBeExplained(full, kNow, 30), waitsToBeExplained(pod, kNow, 30));
      const auto f = judgeTerminations(full), g = judgeTerminations(pod);
      ASSERT_EQ(f.size(), g.size()) << volume;
      for (std::size_t i = 0; i < f.size(); ++i) EXPECT_EQ(f[i].event.message, g[i].event.message);
      const auto l = logsToRead(full), m = logsToRead(pod);
      ASSERT_EQ(l.size(), m.size());
      for (std::size_t i = 0; i < l.size(); ++i) EXPECT_EQ(l[i].key, m[i].key);
      EXPECT_EQ(controllerOf(full)->uid, controllerOf(pod)->uid);
      if (scheduled) {
        EXPECT_FALSE(f.empty());
      } else {
        EXPECT_TRUE(a.event);
      }
    }
  }
}

// A pod of Job llama kept in one NVLink domain (the webhook's podAffinity term), besides
// podAffinity terms of the user's that no reader reads.
json fullMnnvlPod(bool scheduled) {
  json pod = fullPod(scheduled, "podshaper-dshm");
  pod["metadata"]["labels"]["podshaper.io/nvlink-group"] = "job.llama";
  pod["spec"]["affinity"]["podAffinity"] = {
      {"requiredDuringSchedulingIgnoredDuringExecution",
       {nvlinkGroupTerm("job.llama"),
        {{"labelSelector", {{"matchLabels", {{"app", "llama"}}}}}, {"topologyKey", "topology.kubernetes.io/zone"}}}},
      {"preferredDuringSchedulingIgnoredDuringExecution",
       {{{"weight", 1}, {"podAffinityTerm", {{"labelSelector", json::object()}, {"topologyKey", "kubernetes.io/hostname"}}}}}}};
  return pod;
}

TEST(Caches, AKeptMnnvlPodIsExplainedAsTheWholeOne) {
  // Domain a runs the job's pod (bound, as the cache keeps it), domain b is free.
  std::vector<NodeFacts> nodes;
  for (const char* name : {"gpu-0", "gpu-1"}) {
    NodeFacts f;
    f.node = nodeFromJson(nodeObject(8, "20", {{"podshaper.io/topology-validated", "true"}, {"pool", "a"}}));
    f.node.name = name;
    f.node.labels.set("podshaper.io/nvlink-domain", name == std::string("gpu-0") ? "a" : "b");
    nodes.push_back(std::move(f));
  }
  const json bound = fullMnnvlPod(true);
  std::vector<NodeFacts> whole = nodes, fromKept = nodes;
  addBoundPods(whole, {bound});
  addBoundPods(fromKept, {kept(bound, compactPod)});
  EXPECT_EQ(whole[0].nvlinkGroups, std::vector<std::string>{"ml/job.llama"});
  EXPECT_EQ(whole[0].nvlinkGroups, fromKept[0].nvlinkGroups);
  EXPECT_EQ(whole[0].exclusivePods, fromKept[0].exclusivePods);

  const json full = fullMnnvlPod(false);
  const json pod = kept(full, compactPod);
  const PendingJudgement a = judgePending(full, whole, kNow, 30), b = judgePending(pod, fromKept, kNow, 30);
  ASSERT_TRUE(a.event);
  EXPECT_EQ(a.cause, PendingCause::kNvlinkDomain) << a.answer;
  EXPECT_EQ(a.answer, b.answer);
  EXPECT_EQ(a.cause, b.cause);
  // Only the term on the NVLink domain is kept of its podAffinity.
  EXPECT_EQ(pod["spec"]["affinity"]["podAffinity"],
            json({{"requiredDuringSchedulingIgnoredDuringExecution", {nvlinkGroupTerm("job.llama")}}}));
  EXPECT_FALSE(kept(fullPod(false, "dshm"), compactPod)["spec"]["affinity"].contains("podAffinity"));
}

TEST(Caches, AKeptPodIsHeldForItsMemlockAsTheWholeOne) {
  json full = fullPod(true, "podshaper-dshm");
  json init = {{"name", "init"}, {"restartCount", 0}, {"ready", false}, {"image", "busybox"}};
  init["state"]["waiting"] = {{"reason", "CreateContainerError"},
                              {"message", "failed to create containerd container: MemlockNotApplied: node gpu-0 did "
                                          "not apply RLIMIT_MEMLOCK 4Mi (it would get 8Mi, the runtime's default)"}};
  full["status"]["initContainerStatuses"] = {init};
  full["status"]["containerStatuses"][0]["state"] = {
      {"waiting", {{"reason", "PodInitializing"}, {"message", "waiting for init containers"}}}};
  const json pod = kept(full, compactPod);
  ASSERT_EQ(memlockHeld(full).size(), 1u);
  EXPECT_EQ(memlockHeld(full), memlockHeld(pod));
  EXPECT_EQ(memlockHeldOn("gpu-0", {full}), memlockHeldOn("gpu-0", {pod}));
  // Other waits are not kept: a pod's waits and their messages change nothing in the cache.
  EXPECT_FALSE(pod["status"]["containerStatuses"][0].contains("state")) << pod.dump();
  full["status"]["initContainerStatuses"][0]["state"]["waiting"]["message"] = "Back-off pulling image";
  EXPECT_TRUE(memlockHeld(kept(full, compactPod)).empty());
  EXPECT_FALSE(kept(full, compactPod)["status"]["initContainerStatuses"][0].contains("state"));
}

TEST(Caches, AKeptPodFailedAtAdmissionIsExplainedAsTheWholeOne) {
  json full = fullPod(true, "podshaper-dshm");
  full["metadata"]["labels"]["podshaper.io/shaped"] = "true";
  full["status"]["phase"] = "Failed";
  full["status"]["reason"] = "UnexpectedAdmissionError";
  full["status"]["message"] = "Pod was rejected: Allocate failed due to no healthy devices present; cannot allocate "
                              "unhealthy devices nvidia.com/gpu, which is unexpected";
  const auto whole = judgeKubeletRejection(full), fromKept = judgeKubeletRejection(kept(full, compactPod));
  ASSERT_TRUE(whole);
  ASSERT_TRUE(fromKept);
  EXPECT_EQ(whole->event.message, fromKept->event.message);
  // A long message is kept bounded; another reason's is not kept.
  full["status"]["message"] = std::string(100000, 'x');
  EXPECT_LE(kept(full, compactPod)["status"]["message"].get<std::string>().size(), 1024u);
  full["status"]["reason"] = "Evicted";
  EXPECT_FALSE(kept(full, compactPod)["status"].contains("reason"));
  EXPECT_FALSE(kept(full, compactPod)["status"].contains("message"));
}

// A ShmUsage as podshaper-shm writes it: two runs ended, the third open.
json fullShmUsage(long long openPeak) {
  return json::parse(R"json({
    "apiVersion": "podshaper.io/v1alpha1", "kind": "ShmUsage",
    "metadata": {"name": "train-0", "namespace": "ml", "uid": "u-1", "resourceVersion": "9",
                 "creationTimestamp": "2026-11-21T23:00:00Z",
                 "ownerReferences": [{"apiVersion": "v1", "kind": "Pod", "name": "train-0", "uid": "uid-1"}],
                 "managedFields": [{"manager": "podshaper-shm"}]},
    "spec": {"podName": "train-0", "podUID": "uid-1", "nodeName": "gpu-0", "volume": "SHM", "userVolume": true},
    "status": {"sizeBytes": 1073741824, "usedBytes": 1000, "peakBytes": 1000, "runCount": 3,
               "observedAt": "2026-11-22T00:00:00Z",
               "runs": [
                 {"run": 1, "startedAt": "2026-11-21T23:00:00Z", "endedAt": "2026-11-21T23:10:00Z",
                  "sizeBytes": 1073741824, "peakBytes": 536870912, "peakAt": "2026-11-21T23:09:00Z",
                  "nearlyFull": false, "ended": "Error (exit 1)"},
                 {"run": 2, "startedAt": "2026-11-21T23:10:01Z", "endedAt": "2026-11-21T23:20:00Z",
                  "sizeBytes": 1073741824, "peakBytes": 1073741824, "peakAt": "2026-11-21T23:19:59Z",
                  "nearlyFull": true, "ended": "Error (exit 1)"},
                 {"run": 3, "startedAt": "2026-11-21T23:20:01Z", "sizeBytes": 1073741824, "peakBytes": 0}]}
  })json")
      .patch(json::array({{{"op", "replace"}, {"path", "/status/runs/2/peakBytes"}, {"value", openPeak}}}));
}

TEST(Caches, AKeptPodAndShmUsageMakeTheWholeOnesProfile) {
  for (bool withWorkload : {false, true}) {
    json full = fullPod(true, "SHM");
    full["metadata"]["annotations"]["podshaper.io/shm-profile"] = "job.train; ranks=8; inputs=3f9a0c12";
    if (withWorkload) full["metadata"]["annotations"]["podshaper.io/workload"] = "train-7b";
    // The NCCL death of run 2 (lastState) and the cut message of run 3 (state), when they ended.
    auto& cs = full["status"]["containerStatuses"][0];
    cs["lastState"]["terminated"]["finishedAt"] = "2026-11-21T23:20:00Z";
    cs["state"]["terminated"]["finishedAt"] = "2026-11-21T23:30:00Z";
    const json pod = kept(full, compactPod);
    const json fullUsage = fullShmUsage(1000), usage = kept(fullUsage, compactShmUsage);
    for (bool measured : {true, false}) {
      auto inputs = [&](const json& p, const json& u) {
        return ShmProfileInputs{.namespaceName = "ml", .name = "job.train", .existing = nullptr,
                                .pods = {{&p, measured ? &u : nullptr}}, .now = kNow, .settings = {}};
      };
      const ShmProfilePlan a = planShmProfile(inputs(full, fullUsage)), b = planShmProfile(inputs(pod, usage));
      EXPECT_EQ(a.write, ProfileWrite::kCreate);
      ASSERT_EQ(a.runs.size(), b.runs.size());
      EXPECT_EQ(a.runs.size(), measured ? 2u : 1u);
      for (std::size_t i = 0; i < a.runs.size(); ++i) EXPECT_EQ(a.runs[i].toJson(), b.runs[i].toJson());
      EXPECT_EQ(a.runs.back().end, RunEnd::kShmExhausted);
      EXPECT_EQ(a.object, b.object);
      EXPECT_EQ(a.object["spec"]["workload"], withWorkload ? "workload \"train-7b\" (podshaper.io/workload)" : "Job train");
      EXPECT_EQ(a.status, b.status);
      EXPECT_EQ(a.lookAgainAt, b.lookAgainAt);
    }
  }
  // The open run's samples are not kept: a new peak there changes nothing in the cache.
  EXPECT_EQ(kept(fullShmUsage(1000), compactShmUsage), kept(fullShmUsage(5000), compactShmUsage));
  EXPECT_NE(fullShmUsage(1000), fullShmUsage(5000));
}

TEST(Caches, AKeptShmProfileIsItsNameAlone) {
  // Its writes then change nothing in the cache: the watch tells only that one came or went.
  const json profile = {{"apiVersion", "podshaper.io/v1alpha1"},
                        {"kind", "ShmProfile"},
                        {"metadata", {{"name", "job.train"}, {"namespace", "ml"}, {"resourceVersion", "7"}}},
                        {"spec", {{"workload", "Job train"}}},
                        {"status", {{"runCount", 3}}}};
  EXPECT_EQ(kept(profile, compactShmProfile), json::parse(R"({"metadata": {"name": "job.train", "namespace": "ml"}})"));
}

}  // namespace
}  // namespace podshaper::op
