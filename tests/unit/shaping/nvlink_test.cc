// Multi-node NVLink (docs/webhook.md "Multi-node NVLink"): nodes in NVLink domains, the
// job kept in one, the IMEX channel checked, the NCCL reserve of ranks within a domain.
#include "shaping/nvlink.h"

#include <gtest/gtest.h>

#include "pod_builder.h"
#include "shaping/cluster_view.h"
#include "shaping/nccl.h"
#include "shaping/node_class.h"
#include "shaping/pod_shaper.h"

namespace podshaper {
namespace {

using nlohmann::json;
using testing::TrainingPod;
using testing::gpuNode;

constexpr const char* kDomainA = "c0ffee00-0000-4000-8000-000000000001.1";
constexpr const char* kDomainB = "c0ffee00-0000-4000-8000-000000000001.2";
constexpr const char* kChannelClass = "compute-domain-default-channel.nvidia.com";
constexpr const char* kGroupLabel = "podshaper.io/nvlink-group";

Node trayIn(const std::string& name, const std::string& domain) {
  Node n = gpuNode(name, 4);
  if (!domain.empty()) n.labels.set("podshaper.io/nvlink-domain", domain);
  return n;
}

// `counts` nodes of 4 GPUs in each domain ("" for none).
ClusterView rack(const std::vector<std::pair<std::string, int>>& counts) {
  std::vector<Node> nodes;
  for (const auto& [domain, count] : counts) {
    for (int i = 0; i < count; ++i) nodes.push_back(trayIn(domain.substr(0, 4) + "-" + domain + std::to_string(i), domain));
  }
  return clusterViewOf({}, std::move(nodes));
}

json channelTemplate(const std::string& deviceClass = kChannelClass) {
  return {{"kind", "ResourceClaimTemplate"},
          {"metadata", {{"name", "imex"}, {"namespace", "ml"}}},
          {"spec", {{"spec", {{"devices", {{"requests", json::array({{{"name", "channel"},
                                                                        {"exactly", {{"deviceClassName", deviceClass}}}}})}}}}}}}};
}

// A pod of Job "llama" whose job spans `nnodes` nodes, with the channel claim used by its GPU container.
TrainingPod jobPod(const std::string& nnodes = "8", bool channel = true) {
  TrainingPod pod = TrainingPod()
                        .withGpus(4)
                        .at("/metadata/ownerReferences",
                            json::array({{{"kind", "Job"}, {"name", "llama"}, {"controller", true}}}))
                        .at("/spec/containers/0/env", json::array({{{"name", "PET_NNODES"}, {"value", nnodes}}}));
  if (channel) {
    pod.at("/spec/resourceClaims", json::array({{{"name", "imex"}, {"resourceClaimTemplateName", "imex"}}}))
        .at("/spec/containers/0/resources/claims", json::array({{{"name", "imex"}}}));
  }
  return pod;
}

ShapeOutcome shape(const json& pod, const ClusterView& cluster, Config config = {}) {
  AdmissionContext ctx;
  ctx.namespaceName = "ml";
  ctx.cluster = &cluster;
  ctx.claims = claimLookupOver({channelTemplate()});
  return shapePod(pod, config, ctx);
}

bool hasWarning(const ShapeOutcome& out, const std::string& part) {
  for (const auto& w : out.warnings) {
    if (w.find(part) != std::string::npos) return true;
  }
  return false;
}
std::string formulaOf(const ShapeOutcome& out) {
  return out.pod["metadata"]["annotations"].value("podshaper.io/shm-formula", std::string());
}
std::string shmOf(const ShapeOutcome& out) {
  return out.pod["metadata"]["annotations"].value("podshaper.io/shm-size", std::string());
}
const json& podAffinity(const ShapeOutcome& out) { return out.pod["spec"]["affinity"]["podAffinity"]; }
json groupTerm(const std::string& group) {
  return {{"labelSelector",
           {{"matchExpressions", json::array({{{"key", kGroupLabel}, {"operator", "In"}, {"values", {group}}}})}}},
          {"topologyKey", "podshaper.io/nvlink-domain"}};
}

TEST(NvlinkDomains, NodeKindsCountTheirNodesDomains) {
  // Nodes alike but for their domain are one kind, which counts them by domain: an admission
  // reads as few kinds on 700 domains as on one.
  std::vector<Node> nodes = {trayIn("a0", kDomainA), trayIn("a1", kDomainA), trayIn("b0", kDomainB), trayIn("c", ""),
                             gpuNode("h100", 8)};
  auto kinds = nodeKinds(nodes);
  ASSERT_EQ(kinds.size(), 2u);
  EXPECT_EQ(kinds[0].members, (std::vector<std::size_t>{0, 1, 2, 3}));
  EXPECT_EQ(kinds[0].node.label("podshaper.io/nvlink-domain"), nullptr);
  ASSERT_NE(kinds[0].nvlinkDomains, nullptr);
  EXPECT_EQ(*kinds[0].nvlinkDomains, (std::map<std::string, std::size_t>{{kDomainA, 2}, {kDomainB, 1}}));
  EXPECT_EQ(kinds[0].withoutNvlinkDomain, 1u);
  EXPECT_EQ(kinds[1].nvlinkDomains, nullptr);
  EXPECT_EQ(kinds[1].withoutNvlinkDomain, 1u);
}

TEST(NvlinkDomains, KindsOfOneSizeAddTheirDomains) {
  // Two kinds of 4 GPUs (memory differs) in domains that overlap: the class counts their sum.
  std::vector<Node> nodes = {trayIn("a0", kDomainA), trayIn("a1", kDomainA), trayIn("b0", kDomainB)};
  nodes[1].memoryBytes = *nodes[0].memoryBytes / 2;
  nodes[2].memoryBytes = *nodes[0].memoryBytes / 2;
  ClusterView view = clusterViewOf({}, nodes);
  ASSERT_EQ(view.kinds.size(), 2u);
  NodeClass nc = resolveNodeClass(4, std::nullopt, true, NodeSettings{}, &view);
  EXPECT_EQ(nc.nvlinkDomains(), (std::map<std::string, std::size_t>{{kDomainA, 2}, {kDomainB, 1}}));
  EXPECT_TRUE(nc.mnnvl());
  // One kind: its counts are shared, not copied.
  ClusterView one = rack({{kDomainA, 3}});
  NodeClass shared = resolveNodeClass(4, std::nullopt, true, NodeSettings{}, &one);
  EXPECT_EQ(shared.nvlinkDomainCounts, one.kinds[0].nvlinkDomains);
}

TEST(NvlinkDomains, TheNodeClassCountsItsNodesDomains) {
  NodeSettings settings;
  ClusterView two = rack({{kDomainA, 9}, {kDomainB, 7}});
  NodeClass nc = resolveNodeClass(4, std::nullopt, true, settings, &two);
  EXPECT_EQ(nc.nvlinkDomains(), (std::map<std::string, std::size_t>{{kDomainA, 9}, {kDomainB, 7}}));
  EXPECT_EQ(nc.withoutNvlinkDomain, 0u);
  EXPECT_TRUE(nc.mnnvl());
  // One node without a domain among the targets: not an MNNVL class.
  ClusterView mixed = rack({{kDomainA, 3}, {"", 1}});
  NodeClass m = resolveNodeClass(4, std::nullopt, true, settings, &mixed);
  EXPECT_EQ(m.withoutNvlinkDomain, 1u);
  EXPECT_FALSE(m.mnnvl());
  // Nodes of another size are not targets: 8-GPU nodes without a domain leave the 4-GPU class MNNVL.
  ClusterView other = rack({{kDomainA, 2}});
  other.nodes.push_back(gpuNode("h100", 8));
  other.kinds = nodeKinds(other.nodes);
  EXPECT_TRUE(resolveNodeClass(4, std::nullopt, true, settings, &other).mnnvl());
  EXPECT_FALSE(resolveNodeClass(8, std::nullopt, true, settings, &other).mnnvl());
  // Nodes of its size waiting to be validated count as its class.
  ClusterView waiting = clusterViewOf({}, {trayIn("w", kDomainA)});
  waiting.nodes[0].labels.set("podshaper.io/topology-validated", "false");
  waiting.nodes.push_back(gpuNode("ok", 8));
  waiting.kinds = nodeKinds(waiting.nodes);
  EXPECT_TRUE(resolveNodeClass(4, std::nullopt, true, settings, &waiting).mnnvl());
}

TEST(NvlinkDomains, AJobsPodIsKeptInOneDomainWithTheP2PReserve) {
  ClusterView cluster = rack({{kDomainA, 18}});
  auto out = shape(jobPod(), cluster);
  ASSERT_TRUE(out.allowed) << out.message;
  EXPECT_EQ(out.pod["metadata"]["labels"][kGroupLabel], "job.llama");
  EXPECT_EQ(podAffinity(out), json({{"requiredDuringSchedulingIgnoredDuringExecution", {groupTerm("job.llama")}}}));
  // 4 ranks × 4 communicators × 0 over the fabric: the DataLoader's alone (as on one node).
  auto oneNode = shape(TrainingPod().withGpus(4).at("/spec/containers/0/env",
                                                    json::array({{{"name", "PET_NNODES"}, {"value", "1"}}})),
                       cluster);
  EXPECT_EQ(shmOf(out), shmOf(oneNode));
  EXPECT_NE(formulaOf(out).find("P2P: NCCL's P2P transport over the NVLink fabric (cuMem fabric handles through the "
                                "IMEX channel) between the job's ranks, all kept within NVLink domain " +
                                std::string(kDomainA) + " (18 nodes)"),
            std::string::npos)
      << formulaOf(out);
  EXPECT_TRUE(hasWarning(out, "no gang scheduling recognised")) << out.warnings.size();
  EXPECT_TRUE(hasWarning(out, "the first pod of Job llama picks an NVLink domain"));
  // The channel claim's device is not a GPU.
  EXPECT_EQ(out.pod["spec"]["containers"][0]["env"][1], json({{"name", "PET_NPROC_PER_NODE"}, {"value", "4"}}));
}

TEST(NvlinkDomains, GangSchedulingIsRecognised) {
  ClusterView cluster = rack({{kDomainA, 18}});
  const std::vector<std::pair<std::string, json>> gangs = {
      {"/spec/workloadRef", {{"name", "llama"}, {"podGroup", "workers"}}},
      {"/spec/schedulingGroup", {{"podGroupName", "llama-0"}}},
      {"/metadata/annotations/kueue.x-k8s.io~1podset-required-topology", "podshaper.io/nvlink-domain"},
      {"/metadata/annotations/scheduling.k8s.io~1group-name", "llama"},
      {"/metadata/labels/scheduling.x-k8s.io~1pod-group", "llama"}};
  for (const auto& [at, value] : gangs) {
    auto out = shape(jobPod().at(at, value), cluster);
    ASSERT_TRUE(out.allowed) << out.message;
    EXPECT_FALSE(hasWarning(out, "no gang scheduling")) << at;
    EXPECT_TRUE(podAffinity(out).contains("requiredDuringSchedulingIgnoredDuringExecution")) << at;
  }
  // Kueue's preferred topology may split the pod set over domains: no gang.
  auto preferred = shape(jobPod().annotate("kueue.x-k8s.io/podset-preferred-topology", "podshaper.io/nvlink-domain"),
                         cluster);
  ASSERT_TRUE(preferred.allowed) << preferred.message;
  EXPECT_TRUE(hasWarning(preferred, "no gang scheduling recognised"));
}

TEST(NvlinkDomains, PreferredPlacementKeepsTheNetReserve) {
  ClusterView cluster = rack({{kDomainA, 18}});
  Config config = *parseConfig("mnnvl:\n  placement: preferred\n");
  auto out = shape(jobPod(), cluster, config);
  ASSERT_TRUE(out.allowed) << out.message;
  EXPECT_EQ(podAffinity(out),
            json({{"preferredDuringSchedulingIgnoredDuringExecution",
                   {{{"weight", 100}, {"podAffinityTerm", groupTerm("job.llama")}}}}}));
  EXPECT_NE(formulaOf(out).find("(NET: the job spans nodes"), std::string::npos) << formulaOf(out);
  EXPECT_FALSE(hasWarning(out, "no gang scheduling"));
}

TEST(NvlinkDomains, APodWithoutAnImexChannelIsDeniedOrWarned) {
  ClusterView cluster = rack({{kDomainA, 18}});
  auto denied = shape(jobPod("8", false), cluster);
  ASSERT_FALSE(denied.allowed);
  EXPECT_EQ(toString(denied.cause), "nvlink-channel");
  for (const char* part : {"its ranks span nodes (PET_NNODES=8 in container \"trainer\")",
                           "it claims no IMEX channel (no resource claim of device class "
                           "compute-domain-default-channel.nvidia.com)",
                           "MNNVL ... is available but not working", "/dev/nvidia-caps-imex-channels",
                           "spec.channel.resourceClaimTemplate.name", "resourceClaimTemplateName: imex-channel",
                           "NCCL_MNNVL_ENABLE=0"}) {
    EXPECT_NE(denied.message.find(part), std::string::npos) << part << "\n" << denied.message;
  }
  Config warn = *parseConfig("mnnvl:\n  missingChannel: warn\n");
  auto warned = shape(jobPod("8", false), cluster, warn);
  ASSERT_TRUE(warned.allowed) << warned.message;
  EXPECT_TRUE(hasWarning(warned, "(config mnnvl.missingChannel: warn)"));
  // Kept in one domain still, but NCCL cannot use the fabric: NET.
  EXPECT_TRUE(podAffinity(warned).contains("requiredDuringSchedulingIgnoredDuringExecution"));
  EXPECT_NE(formulaOf(warned).find("(NET: the job spans nodes"), std::string::npos) << formulaOf(warned);
  // A claim its GPU container does not use gives it no channel.
  auto unused = shape(jobPod().without("/spec/containers/0/resources/claims"), cluster);
  ASSERT_FALSE(unused.allowed);
  EXPECT_NE(unused.message.find("its IMEX channel claim \"imex\" is not used by container \"trainer\""),
            std::string::npos)
      << unused.message;
  // A claim of another class is no channel.
  AdmissionContext ctx;
  ctx.namespaceName = "ml";
  ctx.cluster = &cluster;
  ctx.claims = claimLookupOver({channelTemplate("other.example.com")});
  EXPECT_FALSE(shapePod(jobPod().json(), Config{}, ctx).allowed);
}

TEST(NvlinkDomains, PodsThatDoNotUseTheFabricNeedNoChannel) {
  ClusterView cluster = rack({{kDomainA, 18}});
  for (const char* env : {"NCCL_MNNVL_ENABLE=0", "NCCL_P2P_DISABLE=1", "NCCL_CUMEM_ENABLE=0"}) {
    const std::string text(env);
    const std::size_t eq = text.find('=');
    TrainingPod pod = jobPod("8", false);
    pod.at("/spec/containers/0/env/1", {{"name", text.substr(0, eq)}, {"value", text.substr(eq + 1)}});
    auto out = shape(pod, cluster);
    ASSERT_TRUE(out.allowed) << env << ": " << out.message;
    EXPECT_EQ(formulaOf(out).find("NVLink fabric"), std::string::npos) << env << ": " << formulaOf(out);
    // Its pods are kept together still (they are one job), sized for NET or SHM.
    EXPECT_TRUE(podAffinity(out).contains("requiredDuringSchedulingIgnoredDuringExecution")) << env;
  }
  // With a channel, MNNVL off in the env is NET as before.
  TrainingPod off = jobPod();
  off.at("/spec/containers/0/env/1", {{"name", "NCCL_MNNVL_ENABLE"}, {"value", "0"}});
  EXPECT_NE(formulaOf(shape(off, cluster)).find("(NET: the job spans nodes"), std::string::npos);
  // A pod that runs no NCCL checks nothing.
  EXPECT_TRUE(shape(jobPod("8", false).annotate("podshaper.io/nccl-communicators", "0"), cluster).allowed);
  // One node: no peer on another node, no term.
  auto one = shape(jobPod("1", false), cluster);
  ASSERT_TRUE(one.allowed) << one.message;
  EXPECT_FALSE(one.pod["spec"]["affinity"].contains("podAffinity"));
  EXPECT_FALSE(one.pod["metadata"]["labels"].contains(kGroupLabel));
}

TEST(NvlinkDomains, AJobLargerThanEveryDomainIsNotHeldToOne) {
  ClusterView cluster = rack({{kDomainA, 9}, {kDomainB, 9}});
  for (const char* nnodes : {"12", "4:12"}) {
    auto out = shape(jobPod(nnodes), cluster);
    ASSERT_TRUE(out.allowed) << out.message;
    EXPECT_FALSE(out.pod["spec"]["affinity"].contains("podAffinity")) << nnodes;
    EXPECT_TRUE(hasWarning(out, "the job spans 12 nodes (PET_NNODES=" + std::string(nnodes) +
                                    " in container \"trainer\"), more than any NVLink domain of its nodes holds "
                                    "(NVLink domains " + kDomainA + " (9 nodes), " + kDomainB + " (9 nodes))"))
        << nnodes;
    EXPECT_NE(formulaOf(out).find("(NET: the job spans nodes"), std::string::npos) << formulaOf(out);
  }
  // 9 fits one of them: required, and the reserve says it is one of the two.
  auto fits = shape(jobPod("9"), cluster);
  EXPECT_NE(formulaOf(fits).find("all kept within one of the NVLink domains"), std::string::npos) << formulaOf(fits);
}

TEST(NvlinkDomains, APodOfUnknownSpanIsNotHeldNorDenied) {
  ClusterView cluster = rack({{kDomainA, 9}, {kDomainB, 9}});
  // A vLLM TP=4 Deployment's replica: each its own world, which may be one node.
  TrainingPod replica = jobPod("8", false).without("/spec/containers/0/env");
  replica.at("/metadata/ownerReferences/0", {{"kind", "ReplicaSet"}, {"name", "vllm-6d4cf56db6"}, {"controller", true}});
  auto out = shape(replica, cluster);
  ASSERT_TRUE(out.allowed) << out.message;
  EXPECT_FALSE(out.pod["spec"]["affinity"].contains("podAffinity"));
  EXPECT_FALSE(out.pod["metadata"]["labels"].contains(kGroupLabel));
  EXPECT_TRUE(hasWarning(out, "the pod's job is not kept in one of the NVLink domains " + std::string(kDomainA) +
                                  " (9 nodes), " + kDomainB + " (9 nodes) because it does not say it spans nodes (no "
                                  "torchrun --nnodes or PET_NNODES in container \"trainer\")"))
      << json(out.warnings).dump();
  EXPECT_TRUE(hasWarning(out, "set PET_NNODES or torchrun --nnodes, or label the job's pods podshaper.io/nvlink-group"));
  EXPECT_TRUE(hasWarning(out, "it claims no IMEX channel (no resource claim of device class "
                              "compute-domain-default-channel.nvidia.com): if its job spans nodes, NCCL would fail"));
  EXPECT_TRUE(hasWarning(out, "or, for a one-node job, set PET_NNODES=1 (or torchrun --standalone)"));
  EXPECT_NE(formulaOf(out).find("(NET: the job may span nodes"), std::string::npos) << formulaOf(out);
  // The denial of a pod that spans nodes says the one-node way out too.
  auto denied = shape(jobPod("8", false), cluster);
  ASSERT_FALSE(denied.allowed);
  EXPECT_NE(denied.message.find("or, for a one-node job, set PET_NNODES=1 (or torchrun --standalone)"),
            std::string::npos)
      << denied.message;
  // The user's group label holds it to one domain all the same.
  auto labelled = shape(jobPod().without("/spec/containers/0/env").at("/metadata/labels/podshaper.io~1nvlink-group", "tp"),
                        cluster);
  ASSERT_TRUE(labelled.allowed) << labelled.message;
  EXPECT_EQ(podAffinity(labelled), json({{"requiredDuringSchedulingIgnoredDuringExecution", {groupTerm("tp")}}}));
  EXPECT_NE(formulaOf(labelled).find("all kept within one of the NVLink domains"), std::string::npos)
      << formulaOf(labelled);
  // A pod that runs no NCCL is no world to hold together.
  auto noNccl = shape(jobPod().annotate("podshaper.io/nccl-communicators", "0"), cluster);
  ASSERT_TRUE(noNccl.allowed) << noNccl.message;
  EXPECT_FALSE(noNccl.pod["spec"]["affinity"].contains("podAffinity"));
}

TEST(NvlinkDomains, ARequiredTermOfTheUsersIsNotAndedWithTheGroups) {
  ClusterView cluster = rack({{kDomainA, 18}});
  const json theirs = {{"labelSelector", {{"matchLabels", {{"app", "cache"}}}}}, {"topologyKey", "kubernetes.io/hostname"}};
  auto out = shape(jobPod().at("/spec/affinity/podAffinity/requiredDuringSchedulingIgnoredDuringExecution",
                               json::array({theirs})),
                   cluster);
  ASSERT_TRUE(out.allowed) << out.message;
  EXPECT_EQ(podAffinity(out), json({{"requiredDuringSchedulingIgnoredDuringExecution", {theirs}}}));
  EXPECT_FALSE(out.pod["metadata"]["labels"].contains(kGroupLabel));
  EXPECT_TRUE(hasWarning(out, "the pod has required podAffinity terms of its own, which every pod of the group would "
                              "have to match as well: Job llama is not kept in one of the NVLink domain"))
      << json(out.warnings).dump();
  EXPECT_NE(formulaOf(out).find("(NET: the job spans nodes"), std::string::npos) << formulaOf(out);
  // Its own term, from an earlier invocation, is no other term.
  auto again = shape(jobPod()
                         .at("/metadata/labels/podshaper.io~1nvlink-group", "job.llama")
                         .at("/spec/affinity/podAffinity/requiredDuringSchedulingIgnoredDuringExecution",
                             json::array({groupTerm("job.llama")})),
                     cluster);
  ASSERT_TRUE(again.allowed) << again.message;
  EXPECT_EQ(podAffinity(again), json({{"requiredDuringSchedulingIgnoredDuringExecution", {groupTerm("job.llama")}}}));
  EXPECT_NE(formulaOf(again).find("all kept within NVLink domain"), std::string::npos) << formulaOf(again);
}

TEST(NvlinkDomains, OneRankPerPodNeedsNoP2PNode) {
  ClusterView cluster = rack({{kDomainA, 18}});
  auto one = shape(jobPod().annotate("podshaper.io/ranks-per-pod", "1"), cluster);
  ASSERT_TRUE(one.allowed) << one.message;
  EXPECT_NE(formulaOf(one).find("over the NVLink fabric"), std::string::npos) << formulaOf(one);
  EXPECT_EQ(one.pod["spec"].dump().find("podshaper.io/p2p"), std::string::npos) << one.pod["spec"].dump();
  // Four ranks on the node read each other's GPUs: the node has P2P between all pairs.
  auto four = shape(jobPod(), cluster);
  EXPECT_NE(four.pod["spec"].dump().find("podshaper.io/p2p"), std::string::npos) << four.pod["spec"].dump();
}

TEST(NvlinkDomains, TheGroupIsTheJob) {
  ClusterView cluster = rack({{kDomainA, 18}});
  auto groupOf = [&](const TrainingPod& pod) {
    auto out = shape(pod, cluster);
    EXPECT_TRUE(out.allowed) << out.message;
    return out.pod["metadata"]["labels"].value(kGroupLabel, std::string());
  };
  // A LeaderWorkerSet's group is one NCCL world.
  TrainingPod lws = jobPod().without("/metadata/ownerReferences");
  lws.at("/metadata/labels/leaderworkerset.sigs.k8s.io~1name", "serve")
      .at("/metadata/labels/leaderworkerset.sigs.k8s.io~1worker-index", "1")
      .at("/metadata/labels/leaderworkerset.sigs.k8s.io~1group-key", "9f2c4b7e1a0d3c5e8b6a4f2d1c0e9b8a7f6e5d4c");
  EXPECT_EQ(groupOf(lws), "leaderworkerset.9f2c4b7e1a0d3c5e8b6a4f2d1c0e9b8a7f6e5d4c");
  // A PyTorchJob's master and workers are one world.
  auto kubeflow = [&](const std::string& type) {
    return jobPod()
        .without("/metadata/ownerReferences")
        .at("/metadata/labels/training.kubeflow.org~1job-name", "bert")
        .at("/metadata/labels/training.kubeflow.org~1replica-type", type)
        .at("/metadata/ownerReferences", json::array({{{"kind", "PyTorchJob"}, {"name", "bert"}, {"controller", true}}}));
  };
  EXPECT_EQ(groupOf(kubeflow("master")), "pytorchjob.bert");
  EXPECT_EQ(groupOf(kubeflow("worker")), "pytorchjob.bert");
  // Two runs of a job at once are two worlds: a Job is its own group, whatever its name looks
  // like and whichever profile it shares (podshaper.io/workload).
  auto run = [&](const std::string& name) {
    return jobPod().at("/metadata/ownerReferences/0/name", name).annotate("podshaper.io/workload", "train");
  };
  EXPECT_EQ(groupOf(run("train-20251122")), "job.train-20251122");
  EXPECT_EQ(groupOf(run("train-20251123")), "job.train-20251123");
  // A user's label is kept, and names the group.
  EXPECT_EQ(groupOf(jobPod().at("/metadata/labels/podshaper.io~1nvlink-group", "mine")), "mine");
  // A long name is cut to a label value's 63 bytes, with its hash.
  const std::string longName(80, 'x');
  auto cut = groupOf(jobPod().at("/metadata/ownerReferences/0/name", longName));
  EXPECT_EQ(cut.size(), 63u);
  EXPECT_EQ(cut.substr(0, 8), "job.xxxx");
  EXPECT_NE(cut, groupOf(jobPod().at("/metadata/ownerReferences/0/name", longName + "y")));
  // A bare pod has no job: no term, and a warning says how to give it one.
  auto bare = shape(jobPod().without("/metadata/ownerReferences"), cluster);
  ASSERT_TRUE(bare.allowed);
  EXPECT_FALSE(bare.pod["spec"]["affinity"].contains("podAffinity"));
  EXPECT_TRUE(hasWarning(bare, "the pod belongs to no workload"));
  EXPECT_NE(formulaOf(bare).find("(NET: the job spans nodes"), std::string::npos);
}

TEST(NvlinkDomains, AChannelGivenWithoutDraIsAChannel) {
  ClusterView cluster = rack({{kDomainA, 18}});
  const json env = json::array({{{"name", "PET_NNODES"}, {"value", "8"}}, {{"name", "NVIDIA_IMEX_CHANNELS"}, {"value", "0"}}});
  // NVIDIA's container toolkit injects the channels NVIDIA_IMEX_CHANNELS names.
  auto byEnv = shape(jobPod("8", false).at("/spec/containers/0/env", env), cluster);
  ASSERT_TRUE(byEnv.allowed) << byEnv.message;
  EXPECT_FALSE(hasWarning(byEnv, "IMEX channel")) << byEnv.warnings.back();
  // ... and kept within the domain over the fabric, as with a claimed channel.
  EXPECT_NE(formulaOf(byEnv).find("P2P: NCCL's P2P transport over the NVLink fabric"), std::string::npos);
  for (const char* none : {"", "none", "void"}) {
    json off = env;
    off[1]["value"] = none;
    EXPECT_FALSE(shape(jobPod("8", false).at("/spec/containers/0/env", off), cluster).allowed) << none;
  }
  // The host's channel devices as a hostPath, the directory or one channel.
  for (const char* path : {"/dev/nvidia-caps-imex-channels", "/dev/nvidia-caps-imex-channels/", "/dev/nvidia-caps-imex-channels/channel0"}) {
    auto byHost = shape(jobPod("8", false)
                            .at("/spec/volumes", json::array({{{"name", "imex"}, {"hostPath", {{"path", path}}}}}))
                            .at("/spec/containers/0/volumeMounts", json::array({{{"name", "imex"}, {"mountPath", path}}})),
                        cluster);
    EXPECT_TRUE(byHost.allowed) << path << ": " << byHost.message;
  }
  // Not another path that begins alike, nor the volume unmounted.
  EXPECT_FALSE(shape(jobPod("8", false)
                         .at("/spec/volumes", json::array({{{"name", "imex"}, {"hostPath", {{"path", "/dev/nvidia-caps-imex-channelsX"}}}}}))
                         .at("/spec/containers/0/volumeMounts", json::array({{{"name", "imex"}, {"mountPath", "/x"}}})),
                     cluster)
                   .allowed);
  EXPECT_FALSE(shape(jobPod("8", false).at("/spec/volumes", json::array({{{"name", "imex"}, {"hostPath", {{"path", "/dev/nvidia-caps-imex-channels"}}}}})),
                     cluster)
                   .allowed);
  // Two GPU containers, one given a channel: the other is named.
  TrainingPod two = jobPod("8", false).withGpus(2).at("/spec/containers/0/env", env);
  json second = two.json()["spec"]["containers"][0];
  second["name"] = "second";
  second["env"] = json::array();
  two.at("/spec/containers/1", second);
  auto denied = shape(two, cluster);
  ASSERT_FALSE(denied.allowed);
  EXPECT_NE(denied.message.find("GPU container \"second\" claim no IMEX channel (no resource claim of device class " +
                                std::string(kChannelClass) + ", no NVIDIA_IMEX_CHANNELS, no hostPath "
                                "/dev/nvidia-caps-imex-channels)"),
            std::string::npos)
      << denied.message;
}

TEST(NvlinkDomains, NodesWithoutEveryDomainAreShapedAsBefore) {
  // One node of the class in no domain: the pod may land there, so nothing changes.
  ClusterView mixed = rack({{kDomainA, 17}, {"", 1}});
  ClusterView plain = rack({{"", 18}});
  auto a = shape(jobPod("8", false), mixed);
  auto b = shape(jobPod("8", false), plain);
  ASSERT_TRUE(a.allowed) << a.message;
  // The same pod but for its warnings (also in its podshaper.io/warnings), which say it: one more.
  json podA = a.pod, podB = b.pod;
  podA["metadata"]["annotations"].erase("podshaper.io/warnings");
  podB["metadata"]["annotations"].erase("podshaper.io/warnings");
  EXPECT_EQ(podA, podB);
  EXPECT_FALSE(a.pod["spec"]["affinity"].contains("podAffinity"));
  ASSERT_EQ(a.warnings.size(), b.warnings.size() + 1);
  EXPECT_TRUE(hasWarning(a, "17 nodes that could take the pod are in NVLink domain " + std::string(kDomainA) +
                                " (17 nodes) and 1 node in none (a fabric still registering, or nodes without one): "
                                "it is shaped as for nodes without a fabric, not kept in one domain, with the NET "
                                "reserve; where it lands in a domain NCCL needs an IMEX channel (a claim of device "
                                "class " + std::string(kChannelClass) + ") or NCCL_MNNVL_ENABLE=0"))
      << a.warnings.back();
  for (const auto& w : b.warnings) EXPECT_TRUE(hasWarning(a, w)) << w;
  // Not said where NCCL does not look at the fabric: a one-node pod, a pod without NCCL.
  auto one = shape(jobPod("1", false), mixed);
  EXPECT_FALSE(hasWarning(one, "in none (a fabric still registering"));
  auto noNccl = shape(jobPod("8", false).annotate("podshaper.io/nccl-communicators", "0"), mixed);
  EXPECT_FALSE(hasWarning(noNccl, "in none (a fabric still registering"));
  // A shared pod is not held to a domain, but still needs its channel.
  ClusterView cluster = rack({{kDomainA, 18}});
  auto shared = shape(jobPod().annotate("podshaper.io/placement", "shared").withGpus(2), cluster);
  ASSERT_TRUE(shared.allowed) << shared.message;
  EXPECT_FALSE(shared.pod["spec"]["affinity"].contains("podAffinity"));
  EXPECT_FALSE(shape(jobPod("8", false).annotate("podshaper.io/placement", "shared").withGpus(2), cluster).allowed);
}

TEST(NvlinkDomains, TheReserveOverTheFabric) {
  NcclReserveInputs in;
  in.ranks = 4;
  in.communicators = 4;
  in.span = {JobSpan::kManyNodes, "PET_NNODES=8", 8};
  in.p2pAllPairs = true;
  in.nvlinkDomain = "NVLink domain d (18 nodes)";
  NcclReserve r = planNcclReserve(in);
  EXPECT_EQ(r.transport, NcclTransport::kP2P);
  EXPECT_EQ(r.perCommunicatorBytes, 0u);
  in.costs.p2p = 1024;
  EXPECT_EQ(planNcclReserve(in).perCommunicatorBytes, 1024u);
  for (NcclEnv env : {NcclEnv{"", "", "NCCL_MNNVL_ENABLE=0"}, NcclEnv{"", "NCCL_CUMEM_ENABLE=0", ""}}) {
    in.env = env;
    EXPECT_EQ(planNcclReserve(in).transport, NcclTransport::kNet) << env.mnnvlOffWhy();
  }
  in.env = {"NCCL_P2P_DISABLE=1", "", ""};
  EXPECT_EQ(planNcclReserve(in).transport, NcclTransport::kShm);  // SHM's pool is the largest
  // Within a domain, ranks of a pod on nodes without P2P between all pairs may still use SHM.
  in.env = {};
  in.p2pAllPairs = false;
  EXPECT_EQ(planNcclReserve(in).transport, NcclTransport::kShm);
}

TEST(NvlinkDomains, NcclsSwitchesAndTheJobsSize) {
  json c = {{"env", json::array({{{"name", "NCCL_MNNVL_ENABLE"}, {"value", "0"}}})}};
  EXPECT_EQ(readNcclEnv(c, "t").mnnvlOff, "NCCL_MNNVL_ENABLE=0 in container \"t\"");
  EXPECT_EQ(readNcclEnv(c, "t").mnnvlOffWhy(), "NCCL_MNNVL_ENABLE=0 in container \"t\"");
  c["env"][0]["value"] = "1";
  EXPECT_EQ(readNcclEnv(c, "t").mnnvlOffWhy(), "");
  EXPECT_EQ(combineNcclEnvs({}, {"", "", "x"}).mnnvlOff, "x");
  json span = {{"command", {"torchrun", "--nnodes=2:16", "t.py"}}};
  EXPECT_EQ(readJobSpan(span, "t").nodes, 16u);
  EXPECT_EQ(readJobSpan({{"command", {"torchrun", "--nnodes=x"}}}, "t").nodes, std::nullopt);
  JobSpan a{JobSpan::kManyNodes, "a", 4}, b{JobSpan::kManyNodes, "b", 9};
  JobSpan both = combineJobSpans(a, b);
  EXPECT_EQ(both.source, "a");
  EXPECT_EQ(both.nodes, 9u);
}

TEST(NvlinkDomains, ConfigKeys) {
  Config defaults;
  EXPECT_EQ(defaults.mnnvl.placement, NvlinkPlacement::kRequired);
  EXPECT_EQ(defaults.mnnvl.missingChannel, MissingChannelAction::kDeny);
  EXPECT_EQ(defaults.mnnvl.computeDomainChannelClass, kChannelClass);
  auto set = parseConfig("mnnvl:\n  placement: preferred\n  missingChannel: warn\n  computeDomainChannelClass: imex.example.com\n");
  ASSERT_TRUE(set.ok()) << set.error().message;
  EXPECT_EQ(set->mnnvl.placement, NvlinkPlacement::kPreferred);
  EXPECT_EQ(set->mnnvl.missingChannel, MissingChannelAction::kWarn);
  EXPECT_EQ(set->mnnvl.computeDomainChannelClass, "imex.example.com");
  const std::vector<std::pair<std::string, std::string>> bad = {
      {"mnnvl:\n  placement: soft\n", "config: mnnvl.placement: \"soft\" is not one of required, preferred"},
      {"mnnvl:\n  missingChannel: ignore\n", "config: mnnvl.missingChannel: \"ignore\" is not one of deny, warn"},
      {"mnnvl:\n  computeDomainChannelClass: Not_A_Class\n",
       "config: mnnvl.computeDomainChannelClass: \"Not_A_Class\" is not a DeviceClass name"},
      {"mnnvl:\n  channel: x\n", "config: mnnvl.channel: unknown key"},
      {"mnnvl:\n  computeDomainChannelClass: gpu.nvidia.com\n",
       "config: mnnvl.computeDomainChannelClass: \"gpu.nvidia.com\" is gpuDeviceClass too"},
      {"mnnvl: required\n", "config: mnnvl: expected a mapping"}};
  for (const auto& [yaml, message] : bad) {
    auto parsed = parseConfig(yaml);
    ASSERT_FALSE(parsed.ok()) << yaml;
    EXPECT_EQ(parsed.error().message.substr(0, message.size()), message) << parsed.error().message;
  }
  // The hash keeps its value for a config that leaves them alone, and changes with each.
  EXPECT_EQ(parseConfig("mnnvl:\n  placement: required\n")->hash(), defaults.hash());
  EXPECT_NE(parseConfig("mnnvl:\n  placement: preferred\n")->hash(), defaults.hash());
  EXPECT_NE(parseConfig("mnnvl:\n  missingChannel: warn\n")->hash(), defaults.hash());
  EXPECT_NE(parseConfig("mnnvl:\n  computeDomainChannelClass: imex.example.com\n")->hash(), defaults.hash());
}

}  // namespace
}  // namespace podshaper
