#include "shaping/pod_shaper.h"

#include <gtest/gtest.h>

#include <algorithm>

#include "pod_builder.h"

namespace podshaper {
namespace {

using nlohmann::json;
using testing::TrainingPod;
using testing::gpuNode;

constexpr const char* kMemlock =
    "- type: RLIMIT_MEMLOCK\n  soft: 18446744073709551615\n  hard: 18446744073709551615\n";

ShapeOutcome shapeNoCluster(const json& pod, Config config = {}) {
  AdmissionContext ctx;
  ctx.namespaceName = "ml";
  return shapePod(pod, config, ctx);
}

ShapeOutcome shapeWith(const json& pod, const ClusterView& cluster, Config config = {}) {
  AdmissionContext ctx;
  ctx.namespaceName = "ml";
  ctx.cluster = &cluster;
  return shapePod(pod, config, ctx);
}

bool hasWarning(const ShapeOutcome& out, const std::string& part) {
  for (const auto& w : out.warnings) {
    if (w.find(part) != std::string::npos) return true;
  }
  return false;
}

TEST(PodShaper, SeedExampleOnValidatedP2PNodesIs7053Mi) {
  ClusterView cluster;
  cluster.nodes = {gpuNode("h100-a", 8), gpuNode("h100-b", 8)};
  auto out = shapeWith(TrainingPod(), cluster);
  ASSERT_TRUE(out.allowed) << out.message;
  const json& pod = out.pod;
  EXPECT_EQ(pod["metadata"]["annotations"]["podshaper.io/shm-size"], "7053Mi");
  EXPECT_EQ(pod["spec"]["volumes"][0],
            json({{"name", "podshaper-dshm"}, {"emptyDir", {{"medium", "Memory"}, {"sizeLimit", "7053Mi"}}}}));
  const json& c = pod["spec"]["containers"][0];
  EXPECT_EQ(c["volumeMounts"][0], json({{"name", "podshaper-dshm"}, {"mountPath", "/dev/shm"}}));
  EXPECT_EQ(c["resources"]["limits"]["memory"], "109453Mi");  // 100Gi + 7053Mi
  EXPECT_EQ(c["resources"]["requests"]["memory"], "109453Mi");
  EXPECT_EQ(c["securityContext"]["capabilities"]["add"], json({"IPC_LOCK"}));
  EXPECT_EQ(c["env"], json({{{"name", "PET_NPROC_PER_NODE"}, {"value", "8"}}}));
  EXPECT_EQ(pod["spec"]["hostIPC"], true);
  EXPECT_EQ(pod["metadata"]["annotations"]["ulimits.noderesource.dev/container.trainer"], kMemlock);
  EXPECT_EQ(pod["metadata"]["labels"]["podshaper.io/placement"], "node-exclusive");
  const json& anti = pod["spec"]["affinity"]["podAntiAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"];
  ASSERT_EQ(anti.size(), 1u);
  EXPECT_EQ(anti[0]["topologyKey"], "kubernetes.io/hostname");
  EXPECT_EQ(anti[0]["namespaceSelector"], json::object());  // every namespace's exclusive pods
  EXPECT_EQ(anti[0]["labelSelector"]["matchExpressions"][0]["key"], "podshaper.io/placement");
  const json& terms = pod["spec"]["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"];
  ASSERT_EQ(terms.size(), 1u);
  EXPECT_EQ(terms[0]["matchExpressions"],
            json::parse(R"([{"key":"podshaper.io/topology-validated","operator":"In","values":["true"]},
                            {"key":"podshaper.io/memlock","operator":"In","values":["unlimited"]},
                            {"key":"podshaper.io/gpu-count","operator":"In","values":["8"]}])"));
  std::string formula = pod["metadata"]["annotations"]["podshaper.io/shm-formula"];
  EXPECT_NE(formula.find("8 ranks × ((8 workers × prefetch 4 + 2 held: the batch being handed over and the one in "
                         "the training step) × 19267584 B (32x3x224x224 float32) + 1Mi for the "
                         "DataLoader's semaphores) = 5249171456 B; +20% headroom = 6299005748 B → 6008Mi"),
            std::string::npos) << formula;
  EXPECT_NE(formula.find("; + NCCL reserve 8 ranks × 4 communicators (config defaults.ncclCommunicators) × 33412Ki "
                         "per rank per communicator = 1045Mi (NET: the job may span nodes (no torchrun --nnodes or "
                         "PET_NNODES in container \"trainer\"; set torchrun --nnodes or PET_NNODES to 1 for a "
                         "one-node job), and NCCL's proxy keeps a pool per rank per communicator for its network "
                         "connections: config ncclShmPerCommunicator.net); /dev/shm = 7053Mi"),
            std::string::npos) << formula;
  std::string shapedBy = pod["metadata"]["annotations"]["podshaper.io/shaped-by"];
  EXPECT_EQ(shapedBy, "podshaper-webhook/dev config=" + Config().hash());
}

TEST(PodShaper, WithoutClusterTheNcclReserveCountsOnSHM) {
  auto out = shapeNoCluster(TrainingPod());
  ASSERT_TRUE(out.allowed) << out.message;
  EXPECT_EQ(out.pod["metadata"]["annotations"]["podshaper.io/shm-size"], "8231Mi");  // 6008 + 8 × 4 × 71108Ki: P2P is not known (SHM)
  EXPECT_TRUE(hasWarning(out, "node memory unknown"));
}

TEST(PodShaper, PartialP2PNodesGetTheSHMReserve) {
  ClusterView cluster;
  cluster.nodes = {gpuNode("a", 8, "all"), gpuNode("b", 8, "partial")};
  auto out = shapeWith(TrainingPod(), cluster);
  ASSERT_TRUE(out.allowed) << out.message;
  EXPECT_EQ(out.pod["metadata"]["annotations"]["podshaper.io/shm-size"], "8231Mi");
}

TEST(PodShaper, ShapingAShapedPodChangesNothing) {
  ClusterView cluster;
  cluster.nodes = {gpuNode("a", 8)};
  auto first = shapeWith(TrainingPod(), cluster);
  ASSERT_TRUE(first.allowed);
  auto second = shapeWith(first.pod, cluster);
  EXPECT_TRUE(second.allowed);
  EXPECT_EQ(second.pod, first.pod);
  EXPECT_TRUE(second.warnings.empty());
  // What podshaper wrote marks a pod shaped, not a volume's name: with podshaper.io/shaped-by
  // stripped, the mount at /dev/shm is the pod's own and nothing is added twice.
  json stripped = first.pod;
  stripped["metadata"]["annotations"].erase("podshaper.io/shaped-by");
  auto again = shapeWith(stripped, cluster);
  ASSERT_TRUE(again.allowed) << again.message;
  EXPECT_EQ(again.pod["spec"]["volumes"].size(), 1u);
  EXPECT_EQ(again.pod["spec"]["containers"][0]["volumeMounts"].size(), 1u);
  EXPECT_EQ(again.pod["spec"]["containers"][0]["resources"], first.pod["spec"]["containers"][0]["resources"]);
  EXPECT_EQ(again.pod["spec"]["containers"][0]["securityContext"]["capabilities"]["add"].size(), 1u);
}

TEST(PodShaper, ContainersWithoutGpusAreUntouched) {
  json sidecar = {{"name", "logger"}, {"image", "busybox"}, {"resources", {{"limits", {{"memory", "1Gi"}}}}}};
  auto out = shapeNoCluster(TrainingPod().withContainer(sidecar));
  ASSERT_TRUE(out.allowed) << out.message;
  EXPECT_EQ(out.pod["spec"]["containers"][1], sidecar);
  EXPECT_FALSE(out.pod["metadata"]["annotations"].contains("ulimits.noderesource.dev/container.logger"));
}

TEST(PodShaper, PodWithoutGpusIsLeftAsItIs) {
  TrainingPod pod;
  pod.without("/spec/containers/0/resources/limits/nvidia.com~1gpu");
  auto out = shapeNoCluster(pod);
  EXPECT_TRUE(out.allowed);
  EXPECT_EQ(out.pod, pod.json());
  EXPECT_TRUE(hasWarning(out, "no container requests nvidia.com/gpu"));
}

TEST(PodShaper, ContainerWithoutMemoryLimitKeepsNone) {
  auto out = shapeNoCluster(TrainingPod().without("/spec/containers/0/resources/limits/memory")
                                .without("/spec/containers/0/resources/requests"));
  ASSERT_TRUE(out.allowed) << out.message;
  const json& resources = out.pod["spec"]["containers"][0]["resources"];
  EXPECT_FALSE(resources["limits"].contains("memory"));
  EXPECT_FALSE(resources.contains("requests"));
}

TEST(PodShaper, MemoryShareFollowsEachContainersGpus) {
  // 6 + 2 GPUs: shares are ceil_MiB(shm × 6/8) and ceil_MiB(shm × 2/8) of 8231Mi.
  json second = {{"name", "eval"},
                 {"resources", {{"limits", {{"nvidia.com/gpu", "2"}, {"memory", "10Gi"}}}}}};
  auto out = shapeNoCluster(TrainingPod().withGpus(6).withContainer(second));
  ASSERT_TRUE(out.allowed) << out.message;
  const json& cs = out.pod["spec"]["containers"];
  EXPECT_EQ(cs[0]["resources"]["limits"]["memory"], "108574Mi");  // 102400 + 8231×6/8
  EXPECT_EQ(cs[1]["resources"]["limits"]["memory"], "12298Mi");   // 10240 + 8231×2/8
  EXPECT_EQ(cs[1]["volumeMounts"][0]["mountPath"], "/dev/shm");
  EXPECT_EQ(cs[0]["env"][0]["value"], "6");  // each torchrun starts its share of the 8 ranks
  EXPECT_EQ(cs[1]["env"][0]["value"], "2");
  EXPECT_EQ(out.pod["spec"]["volumes"].size(), 1u);
  EXPECT_TRUE(out.pod["metadata"]["annotations"].contains("ulimits.noderesource.dev/container.eval"));
}

TEST(PodShaper, UsersOwnShmMountIsKeptWithAWarningWhenSmall) {
  TrainingPod pod;
  pod.at("/spec/volumes", json::array({{{"name", "shm"}, {"emptyDir", {{"medium", "Memory"}, {"sizeLimit", "1Gi"}}}}}));
  pod.at("/spec/containers/0/volumeMounts", json::array({{{"name", "shm"}, {"mountPath", "/dev/shm"}}}));
  auto out = shapeNoCluster(pod);
  ASSERT_TRUE(out.allowed) << out.message;
  EXPECT_EQ(out.pod["spec"]["volumes"].size(), 1u);
  EXPECT_EQ(out.pod["spec"]["containers"][0]["volumeMounts"].size(), 1u);
  EXPECT_EQ(out.pod["spec"]["containers"][0]["resources"]["limits"]["memory"], "100Gi");
  EXPECT_TRUE(hasWarning(out, "keeps its own /dev/shm, emptyDir \"shm\" (medium Memory, sizeLimit 1Gi), smaller than the "
                              "8231Mi"));
  // Large enough: no warning.
  pod.at("/spec/volumes/0/emptyDir/sizeLimit", "64Gi");
  EXPECT_FALSE(hasWarning(shapeNoCluster(pod), "own /dev/shm"));
}

TEST(PodShaper, IpcLockAddedOnceAndUserEnvKept) {
  TrainingPod pod;
  pod.at("/spec/containers/0/securityContext", {{"capabilities", {{"add", {"SYS_PTRACE", "IPC_LOCK"}}}}});
  pod.at("/spec/containers/0/env", json::array({{{"name", "PET_NPROC_PER_NODE"}, {"value", "4"}}}));
  auto out = shapeNoCluster(pod.annotate("podshaper.io/ranks-per-pod", "4"));
  ASSERT_TRUE(out.allowed) << out.message;
  const json& c = out.pod["spec"]["containers"][0];
  EXPECT_EQ(c["securityContext"]["capabilities"]["add"], json({"SYS_PTRACE", "IPC_LOCK"}));
  EXPECT_EQ(c["env"], json({{{"name", "PET_NPROC_PER_NODE"}, {"value", "4"}}}));
}

TEST(PodShaper, UsersUlimitAnnotationGainsMemlock) {
  const std::string nofile = "- type: nofile\n  soft: 1\n  hard: 2";
  auto out = shapeNoCluster(TrainingPod().annotate("ulimits.noderesource.dev/container.trainer", nofile));
  ASSERT_TRUE(out.allowed);
  EXPECT_EQ(out.pod["metadata"]["annotations"]["ulimits.noderesource.dev/container.trainer"],
            nofile + "\n" + kMemlock);
  // The deprecated key is extended in place, not shadowed by the new one.
  auto old = shapeNoCluster(TrainingPod().annotate("ulimits.nri.containerd.io/container.trainer", nofile));
  EXPECT_EQ(old.pod["metadata"]["annotations"]["ulimits.nri.containerd.io/container.trainer"], nofile + "\n" + kMemlock);
  EXPECT_FALSE(old.pod["metadata"]["annotations"].contains("ulimits.noderesource.dev/container.trainer"));
  // A memlock the user chose is theirs.
  const std::string own = "- type: memlock\n  soft: 1024\n  hard: 1024\n";
  auto kept = shapeNoCluster(TrainingPod().annotate("ulimits.noderesource.dev/container.trainer", own));
  EXPECT_EQ(kept.pod["metadata"]["annotations"]["ulimits.noderesource.dev/container.trainer"], own);
  // Not a list: left as it is, with a warning.
  auto bad = shapeNoCluster(TrainingPod().annotate("ulimits.noderesource.dev/container.trainer", "memlock=-1"));
  EXPECT_EQ(bad.pod["metadata"]["annotations"]["ulimits.noderesource.dev/container.trainer"], "memlock=-1");
  EXPECT_TRUE(hasWarning(bad, "is not a list of ulimits; left as it is"));
}

TEST(PodShaper, ContainerNameTooLongForTheUlimitKeyIsWarnedAbout) {
  std::string name(54, 'a');
  auto out = shapeNoCluster(TrainingPod().at("/spec/containers/0/name", name));
  ASSERT_TRUE(out.allowed) << out.message;
  EXPECT_FALSE(out.pod["metadata"]["annotations"].contains("ulimits.noderesource.dev/container." + name));
  EXPECT_TRUE(hasWarning(out, "name too long for the NRI ulimit annotation key"));
  std::string fits(53, 'a');
  auto ok = shapeNoCluster(TrainingPod().at("/spec/containers/0/name", fits));
  EXPECT_TRUE(ok.pod["metadata"]["annotations"].contains("ulimits.noderesource.dev/container." + fits));
}

TEST(PodShaper, PodsWithoutTheOptInLabelAreUntouched) {
  for (json value : {json("false"), json("yes"), json(true)}) {
    TrainingPod pod;
    pod.at("/metadata/labels/podshaper.io~1inject", value);
    auto out = shapeNoCluster(pod);
    EXPECT_TRUE(out.allowed);
    EXPECT_EQ(out.pod, pod.json());
  }
  auto unlabelled = shapeNoCluster(TrainingPod().without("/metadata/labels"));
  EXPECT_EQ(unlabelled.pod, TrainingPod().without("/metadata/labels").json());
}

TEST(PodShaper, NodeAffinityIsAddedToEveryExistingTerm) {
  TrainingPod pod;
  pod.at("/spec/affinity/nodeAffinity/requiredDuringSchedulingIgnoredDuringExecution/nodeSelectorTerms",
         json::parse(R"([{"matchExpressions":[{"key":"zone","operator":"In","values":["a"]}]},
                         {"matchFields":[{"key":"metadata.name","operator":"In","values":["n1"]}]}])"));
  auto out = shapeNoCluster(pod);
  ASSERT_TRUE(out.allowed) << out.message;
  const json& terms = out.pod["spec"]["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"];
  ASSERT_EQ(terms.size(), 2u);
  EXPECT_EQ(terms[0]["matchExpressions"].size(), 4u);
  EXPECT_EQ(terms[0]["matchExpressions"][0]["key"], "zone");
  EXPECT_EQ(terms[1]["matchExpressions"].size(), 3u);
  EXPECT_EQ(terms[1]["matchFields"].size(), 1u);
}

TEST(PodShaper, AMemlockQuantityIsAskedAndNodesGrantingItAdmitted) {
  Config config;
  config.node.memlock = MemlockLimit{4 << 20};
  ClusterView cluster;
  cluster.nodes = {gpuNode("a", 8)};
  auto out = shapeWith(TrainingPod(), cluster, config);
  ASSERT_TRUE(out.allowed) << out.message;
  EXPECT_EQ(out.pod["metadata"]["annotations"]["ulimits.noderesource.dev/container.trainer"],
            "- type: RLIMIT_MEMLOCK\n  soft: 4194304\n  hard: 4194304\n");
  // A node with unlimited memlock, or with at least 4 MiB: one term each (terms are ORed).
  const json& terms = out.pod["spec"]["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"];
  EXPECT_EQ(terms, json::parse(R"([
    {"matchExpressions":[{"key":"podshaper.io/topology-validated","operator":"In","values":["true"]},
                         {"key":"podshaper.io/memlock","operator":"In","values":["unlimited"]},
                         {"key":"podshaper.io/gpu-count","operator":"In","values":["8"]}]},
    {"matchExpressions":[{"key":"podshaper.io/topology-validated","operator":"In","values":["true"]},
                         {"key":"podshaper.io/memlock","operator":"Gt","values":["4194303"]},
                         {"key":"podshaper.io/gpu-count","operator":"In","values":["8"]}]}])"));
  EXPECT_EQ(out.pod["metadata"]["annotations"]["podshaper.io/shaped-by"],
            "podshaper-webhook/dev config=" + config.hash());
}

// placePod keeps the last node requirements per thread: each pod still gets its own, in
// whatever order pods of different memlock, node size and placement come.
TEST(PodShaper, NodeRequirementsFollowEachPodWhateverThePodBefore) {
  auto termsOf = [](const ShapeOutcome& out) {
    return out.pod["spec"]["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
                  ["nodeSelectorTerms"];
  };
  ClusterView cluster;
  cluster.nodes = {gpuNode("a", 8), gpuNode("b", 4)};
  Config unlimited, bytes;
  bytes.node.memlock = MemlockLimit{4 << 20};
  const TrainingPod eight, four = TrainingPod().withGpus(4),
                           shared = TrainingPod().annotate("podshaper.io/placement", "shared");
  const std::vector<std::pair<const json*, const Config*>> pods = {
      {&eight.json(), &bytes}, {&four.json(), &bytes}, {&shared.json(), &bytes}, {&eight.json(), &unlimited}};
  std::vector<json> alone;
  for (const auto& [pod, config] : pods) alone.push_back(termsOf(shapeWith(*pod, cluster, *config)));
  // Four different answers: a memlock in bytes is two terms, unlimited one; the node size
  // follows the pod; a shared pod names none.
  EXPECT_EQ(alone[0].size(), 2u);
  EXPECT_EQ(alone[3].size(), 1u);
  EXPECT_NE(alone[0], alone[1]);
  EXPECT_EQ(alone[2][0]["matchExpressions"].size() + 1, alone[0][0]["matchExpressions"].size());
  EXPECT_NE(alone[1][0].dump().find(R"({"key":"podshaper.io/gpu-count","operator":"In","values":["4"]})"),
            std::string::npos);
  // Each again, in the other order: the same terms.
  for (std::size_t i = pods.size(); i-- > 0;) {
    EXPECT_EQ(termsOf(shapeWith(*pods[i].first, cluster, *pods[i].second)), alone[i]) << i;
  }
}

TEST(PodShaper, AMemlockQuantityDoublesEveryExistingTerm) {
  TrainingPod pod;
  pod.at("/spec/affinity/nodeAffinity/requiredDuringSchedulingIgnoredDuringExecution/nodeSelectorTerms",
         json::parse(R"([{"matchExpressions":[{"key":"zone","operator":"In","values":["a"]}]},
                         {"matchExpressions":[{"key":"zone","operator":"In","values":["b"]}]}])"));
  Config config;
  config.node.memlock = MemlockLimit{64ULL << 30};
  auto out = shapeNoCluster(pod, config);
  ASSERT_TRUE(out.allowed) << out.message;
  const json& terms = out.pod["spec"]["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"];
  ASSERT_EQ(terms.size(), 4u);
  const std::vector<std::pair<std::string, std::string>> want = {
      {"a", "In"}, {"a", "Gt"}, {"b", "In"}, {"b", "Gt"}};
  for (std::size_t i = 0; i < want.size(); ++i) {
    const json& exprs = terms[i]["matchExpressions"];
    ASSERT_EQ(exprs.size(), 4u) << terms[i];
    EXPECT_EQ(exprs[0]["values"][0], want[i].first);
    EXPECT_EQ(exprs[2]["key"], "podshaper.io/memlock");
    EXPECT_EQ(exprs[2]["operator"], want[i].second);
  }
  EXPECT_EQ(terms[1]["matchExpressions"][2]["values"], json({"68719476735"}));
}

TEST(PodShaper, NodesThatDoNotGrantTheMemlockAreNotTargetsAndThePodWaitsForOne) {
  // The 8-GPU node grants only 64 KiB: for unlimited memlock no node of 8 GPUs can take the
  // pod now. One exists, so the pod is shaped for it and waits, told why.
  ClusterView cluster;
  cluster.nodes = {gpuNode("h100", 8), gpuNode("l40s", 4, "partial")};
  cluster.nodes[0].labels.set("podshaper.io/memlock", "65536");
  auto out = shapeWith(TrainingPod(), cluster);
  ASSERT_TRUE(out.allowed) << out.message;
  EXPECT_TRUE(hasWarning(out, "no node with 8 GPUs can take the pod now: h100 (grants memlock 65536, not the "
                              "unlimited asked): it waits Pending until one can (kubectl describe pod tells why it "
                              "waits)"));
  const json& expr = out.pod["spec"]["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
                        ["nodeSelectorTerms"][0]["matchExpressions"];
  EXPECT_NE(std::find(expr.begin(), expr.end(),
                      json({{"key", "podshaper.io/gpu-count"}, {"operator", "In"}, {"values", {"8"}}})),
            expr.end())
      << expr;
  // Asked for 64 KiB or less, it is a target.
  Config small;
  small.node.memlock = MemlockLimit{65536};
  auto granted = shapeWith(TrainingPod(), cluster, small);
  EXPECT_TRUE(granted.allowed) << granted.message;
  EXPECT_FALSE(hasWarning(granted, "can take the pod now"));
  cluster.nodes[0].labels.set("podshaper.io/memlock", "not-granted");
  auto notGranted = shapeWith(TrainingPod(), cluster, small);
  EXPECT_TRUE(notGranted.allowed);
  EXPECT_TRUE(hasWarning(notGranted, "h100 (grants memlock not-granted, not the 64Ki asked)"));
}

TEST(PodShaper, ASizeNoNodeHasIsDeniedNamingTheSizesThatExist) {
  ClusterView cluster;
  cluster.nodes = {gpuNode("a", 4), gpuNode("b", 4), gpuNode("c", 2)};
  auto out = shapeWith(TrainingPod(), cluster);  // 8 GPUs
  EXPECT_FALSE(out.allowed);
  EXPECT_NE(out.message.find("nodes of its class have 4 (from the cluster's validated nodes); the cluster's GPU nodes "
                             "have 4 GPUs (2 nodes) or 2 (1 node): split the job into pods of 4 GPUs each"),
            std::string::npos)
      << out.message;
}

TEST(PodShaper, NodesOfTheSizeAskedThatAreNotValidatedMakeItWait) {
  // Their reports went stale: the operator labelled them not validated.
  ClusterView cluster;
  cluster.nodes = {gpuNode("a", 8), gpuNode("b", 8), gpuNode("c", 4)};
  cluster.nodes[0].labels.set("podshaper.io/topology-validated", "false");
  cluster.nodes[1].labels.set("podshaper.io/topology-validated", "false");
  auto out = shapeWith(TrainingPod(), cluster);
  ASSERT_TRUE(out.allowed) << out.message;
  EXPECT_TRUE(hasWarning(out, "no node with 8 GPUs can take the pod now: a (not validated (kubectl describe gtr a)), "
                              "b (not validated (kubectl describe gtr b)): it waits Pending"));
  EXPECT_NE(out.pod["metadata"]["annotations"]["podshaper.io/warnings"].get<std::string>().find(
                "\nno node with 8 GPUs can take the pod now"),
            std::string::npos)
      << out.pod["metadata"]["annotations"];
}

TEST(PodShaper, ShapedPodsAreLabelledKeepTheirWarningsAndFallBackToLogs) {
  TrainingPod pod;
  pod.at("/spec/containers/0/terminationMessagePolicy", "File");
  pod.at("/metadata/annotations/podshaper.io~1warnings", "written by the user");
  auto out = shapeNoCluster(pod, Config());
  ASSERT_TRUE(out.allowed) << out.message;
  EXPECT_EQ(out.pod["metadata"]["labels"]["podshaper.io/shaped"], "true");
  EXPECT_EQ(out.pod["spec"]["containers"][0]["terminationMessagePolicy"], "FallbackToLogsOnError");
  ASSERT_FALSE(out.warnings.empty());
  std::string joined;
  for (const auto& w : out.warnings) joined += (joined.empty() ? "" : "\n") + w.substr(std::string("podshaper: ").size());
  EXPECT_EQ(out.pod["metadata"]["annotations"]["podshaper.io/warnings"], joined);
}

TEST(PodShaper, AWarningsAnnotationStaysSmall) {
  // One warning per non-root container: many containers, many lines.
  TrainingPod pod;
  json containers = json::array();
  for (int i = 0; i < 64; ++i) {
    containers.push_back({{"name", "rank-with-a-very-long-name-that-makes-long-warnings-" + std::to_string(i)},
                          {"image", "x"},
                          {"securityContext", {{"runAsUser", 1000}}},
                          {"resources", {{"limits", {{"nvidia.com/gpu", "1"}}}}}});
  }
  pod.at("/spec/containers", containers);
  pod.at("/metadata/annotations/podshaper.io~1placement", "shared");
  auto out = shapeNoCluster(pod, Config());
  ASSERT_TRUE(out.allowed) << out.message;
  const std::string w = out.pod["metadata"]["annotations"]["podshaper.io/warnings"];
  EXPECT_LE(w.size(), 4096u + 64);
  EXPECT_NE(w.find(" more: the create response lists them all)"), std::string::npos) << w.substr(w.size() - 100);
  // A container that chose FallbackToLogsOnError keeps it; none is given one twice.
  EXPECT_EQ(out.pod["spec"]["containers"][7]["terminationMessagePolicy"], "FallbackToLogsOnError");
}

TEST(PodShaper, NonRootGpuContainersAreWarnedThatIpcLockDoesNotHelp) {
  auto runsAs = [](const ShapeOutcome& out) {
    for (const auto& w : out.warnings) {
      if (w.find("IPC_LOCK is not effective") != std::string::npos) return w;
    }
    return std::string();
  };
  // The container's own user.
  auto user = shapeNoCluster(TrainingPod().at("/spec/containers/0/securityContext/runAsUser", 1000));
  ASSERT_TRUE(user.allowed) << user.message;
  EXPECT_EQ(user.pod["spec"]["containers"][0]["securityContext"]["capabilities"]["add"], json({"IPC_LOCK"}));
  EXPECT_EQ(runsAs(user),
            "podshaper: container \"trainer\" runs as user 1000: IPC_LOCK is not effective for a non-root process, "
            "so the memory it can lock rests on RLIMIT_MEMLOCK from the NRI annotation "
            "ulimits.noderesource.dev/container.trainer (unlimited), which the node must grant (node label "
            "podshaper.io/memlock)");
  // The pod's, with the limit asked in the config.
  Config config;
  config.node.memlock = MemlockLimit{4 << 20};
  auto pod = shapeNoCluster(TrainingPod().at("/spec/securityContext/runAsUser", 65532), config);
  EXPECT_NE(runsAs(pod).find("runs as user 65532"), std::string::npos) << runsAs(pod);
  EXPECT_NE(runsAs(pod).find("(4Mi)"), std::string::npos) << runsAs(pod);
  // runAsNonRoot alone: the image's user is unknown.
  auto maybe = shapeNoCluster(TrainingPod().at("/spec/securityContext/runAsNonRoot", true));
  EXPECT_NE(runsAs(maybe).find("sets runAsNonRoot without runAsUser, so it may run as a non-root user"),
            std::string::npos) << runsAs(maybe);
  EXPECT_NE(runsAs(maybe).find("may rest on RLIMIT_MEMLOCK"), std::string::npos) << runsAs(maybe);
  // A memlock of the user's own.
  auto own = shapeNoCluster(TrainingPod()
                                .at("/spec/containers/0/securityContext/runAsUser", 1000)
                                .annotate("ulimits.noderesource.dev/container.trainer",
                                          "- type: memlock\n  soft: 1024\n  hard: 1024\n"));
  EXPECT_NE(runsAs(own).find("from the pod's own ulimit annotation"), std::string::npos) << runsAs(own);
  // Root: the container's runAsUser 0 wins over the pod's; and a pod that says nothing.
  EXPECT_EQ(runsAs(shapeNoCluster(TrainingPod()
                                      .at("/spec/securityContext/runAsUser", 1000)
                                      .at("/spec/containers/0/securityContext/runAsUser", 0))),
            "");
  EXPECT_EQ(runsAs(shapeNoCluster(TrainingPod()
                                      .at("/spec/securityContext/runAsNonRoot", true)
                                      .at("/spec/containers/0/securityContext/runAsNonRoot", false))),
            "");
  EXPECT_EQ(runsAs(shapeNoCluster(TrainingPod())), "");
  // Without IPC_LOCK (podSecurity: warn in a baseline namespace) there is nothing to warn about.
  ClusterView cluster;
  cluster.namespaceLabels["ml"] = {{"pod-security.kubernetes.io/enforce", "baseline"}};
  Config warn;
  warn.podSecurity = PodSecurityAction::kWarn;
  EXPECT_EQ(runsAs(shapeWith(TrainingPod().at("/spec/containers/0/securityContext/runAsUser", 1000), cluster, warn)),
            "");
}

TEST(PodShaper, SharedPlacementHasNoAntiAffinityNorGpuCount) {
  auto out = shapeNoCluster(TrainingPod().withGpus(2).annotate("podshaper.io/placement", "shared"));
  ASSERT_TRUE(out.allowed) << out.message;
  EXPECT_FALSE(out.pod["spec"]["affinity"].contains("podAntiAffinity"));
  EXPECT_FALSE(out.pod["metadata"]["labels"].contains("podshaper.io/placement"));
  const json& exprs = out.pod["spec"]["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"][0]["matchExpressions"];
  EXPECT_EQ(exprs.size(), 2u);
  EXPECT_EQ(out.pod["metadata"]["annotations"]["podshaper.io/shm-size"], "2058Mi");  // 2 ranks: 1502 + 2 × 4 × 71108Ki (SHM)
}

TEST(PodShaper, SharedPodsAreJudgedOverEveryNodeTheyFit) {
  ClusterView cluster;
  cluster.nodes = {gpuNode("l40s", 4, "all", true, 384LL << 30), gpuNode("a100", 8, "partial")};
  auto two = shapeWith(TrainingPod().withGpus(2).annotate("podshaper.io/placement", "shared"), cluster);
  ASSERT_TRUE(two.allowed) << two.message;
  EXPECT_EQ(two.pod["metadata"]["annotations"]["podshaper.io/shm-size"], "2058Mi");  // a100 lacks P2P: SHM
  cluster.nodes[1].labels.set("podshaper.io/p2p", "all");
  auto allP2P = shapeWith(TrainingPod().withGpus(2).annotate("podshaper.io/placement", "shared"), cluster);
  EXPECT_EQ(allP2P.pod["metadata"]["annotations"]["podshaper.io/shm-size"], "1764Mi");  // 1502 + 2 × 4 × 33412Ki (NET: the job may span nodes)
  // Too big for the smallest node it may land on (384Gi: cap 192Gi).
  auto huge = shapeWith(TrainingPod().withGpus(2).annotate("podshaper.io/placement", "shared")
                            .annotate("podshaper.io/dataloader-workers", "64").annotate("podshaper.io/prefetch-factor", "128"), cluster);
  EXPECT_FALSE(huge.allowed);
  EXPECT_NE(huge.message.find("of the node's 384Gi"), std::string::npos) << huge.message;
}

TEST(PodShaper, SingleRankKeepsTheNcclReserve) {
  auto out = shapeNoCluster(TrainingPod().withGpus(1).annotate("podshaper.io/placement", "shared"));
  ASSERT_TRUE(out.allowed) << out.message;
  // 656146432 × 1.2 → 751Mi, + 1 × 4 × 33412Ki: a rank of a multi-node job talks to the others over NET.
  EXPECT_EQ(out.pod["metadata"]["annotations"]["podshaper.io/shm-size"], "882Mi");
}

TEST(PodShaper, TheNcclReserveCanBeTurnedOff) {
  Config config;
  config.podDefaults.ncclCommunicators = 0;
  auto out = shapeNoCluster(TrainingPod(), config);
  ASSERT_TRUE(out.allowed) << out.message;
  EXPECT_EQ(out.pod["metadata"]["annotations"]["podshaper.io/shm-size"], "6008Mi");
  std::string formula = out.pod["metadata"]["annotations"]["podshaper.io/shm-formula"];
  EXPECT_NE(formula.find("; no NCCL reserve (config defaults.ncclCommunicators is 0: the pod runs no NCCL)"),
            std::string::npos) << formula;
}

// The NCCL reserve: ranks × communicators × what NCCL keeps per rank per communicator over
// the transport its ranks use (docs/webhook.md "The NCCL reserve").
std::string formulaOf(const ShapeOutcome& out) {
  return out.pod["metadata"]["annotations"].value("podshaper.io/shm-formula", std::string());
}
std::string shmOf(const ShapeOutcome& out) {
  return out.pod["metadata"]["annotations"].value("podshaper.io/shm-size", std::string());
}
TrainingPod withNnodes(const std::string& value) {
  return TrainingPod().at("/spec/containers/0/env", json::array({{{"name", "PET_NNODES"}, {"value", value}}}));
}

TEST(PodShaper, OneNodeWithP2PBetweenAllPairsKeepsNoNcclReserve) {
  ClusterView cluster;
  cluster.nodes = {gpuNode("a", 8)};
  auto out = shapeWith(withNnodes("1"), cluster);
  ASSERT_TRUE(out.allowed) << out.message;
  EXPECT_EQ(shmOf(out), "6008Mi");
  EXPECT_NE(formulaOf(out).find("; + NCCL reserve 8 ranks × 4 communicators (config defaults.ncclCommunicators) × 0 B "
                                "per rank per communicator = 0Mi (P2P on one node (PET_NNODES=1 in container "
                                "\"trainer\"): the pod's ranks read each other's GPUs directly"),
            std::string::npos) << formulaOf(out);
  // torchrun's own flags say it too, and win over the environment, as in torchrun.
  for (json command : {json::array({"torchrun", "--standalone", "--nproc-per-node=8", "train.py"}),
                       json::array({"bash", "-c", "torchrun --nnodes=1 train.py"}),
                       json::array({"torchrun", "--nnodes", "1:1", "train.py"})}) {
    auto flagged = shapeWith(withNnodes("4").at("/spec/containers/0/command", command), cluster);
    ASSERT_TRUE(flagged.allowed) << flagged.message;
    EXPECT_EQ(shmOf(flagged), "6008Mi") << command.dump() << ": " << formulaOf(flagged);
  }
}

TEST(PodShaper, TheJobSpanIsReadAsTorchrunAndKubernetesWouldReadIt) {
  ClusterView cluster;
  cluster.nodes = {gpuNode("a", 8)};
  auto withCommand = [](json command, json env = json::array()) {
    return TrainingPod().at("/spec/containers/0/command", std::move(command)).at("/spec/containers/0/env", std::move(env));
  };
  // Any torchrun the container starts across nodes makes it a job across nodes.
  auto two = shapeWith(withCommand({"sh", "-c", "torchrun --standalone prep.py && torchrun --nnodes=4 train.py"}), cluster);
  EXPECT_EQ(shmOf(two), "7053Mi") << formulaOf(two);
  // $(NAME) is expanded from the container's env, as the kubelet does.
  auto expanded = shapeWith(withCommand({"torchrun", "--nnodes=$(NNODES)", "train.py"},
                                        json::array({{{"name", "NNODES"}, {"value", "1"}}})),
                            cluster);
  EXPECT_EQ(shmOf(expanded), "6008Mi") << formulaOf(expanded);
  // A range whose least is above its most, or an open end, is not a node count.
  for (const char* bad : {"2:1", "1:", ":4", "0", "0:1"}) {
    auto out = shapeWith(withNnodes(bad), cluster);
    EXPECT_EQ(shmOf(out), "7053Mi") << bad;
    EXPECT_NE(formulaOf(out).find("is not a node count"), std::string::npos) << bad << ": " << formulaOf(out);
  }
  // The last of a repeated env name is the one the container gets.
  auto repeated = shapeWith(TrainingPod().at("/spec/containers/0/env",
                                             json::array({{{"name", "PET_NNODES"}, {"value", "4"}},
                                                          {{"name", "PET_NNODES"}, {"value", "1"}}})),
                            cluster);
  EXPECT_EQ(shmOf(repeated), "6008Mi") << formulaOf(repeated);
  // Two GPU containers: one that may span nodes makes the pod's ranks NET.
  json second = {{"name", "second"},
                 {"image", "pytorch:2"},
                 {"resources", {{"limits", {{"nvidia.com/gpu", "4"}}}}}};
  auto mixed = shapeWith(withNnodes("1").withGpus(4).withContainer(second), cluster);
  ASSERT_TRUE(mixed.allowed) << mixed.message;
  EXPECT_NE(formulaOf(mixed).find("(NET: the job may span nodes (no torchrun --nnodes or PET_NNODES in container "
                                  "\"second\""),
            std::string::npos) << formulaOf(mixed);
}

TEST(PodShaper, NcclsOwnSwitchesInTheEnvChangeTheTransport) {
  ClusterView cluster;
  cluster.nodes = {gpuNode("a", 8)};
  auto env = [](std::string name, std::string value) {
    return withNnodes("1").at("/spec/containers/0/env/1", json({{"name", name}, {"value", value}}));
  };
  auto noP2P = shapeWith(env("NCCL_P2P_DISABLE", "1"), cluster);
  EXPECT_EQ(shmOf(noP2P), "8231Mi");
  EXPECT_NE(formulaOf(noP2P).find("(SHM on one node (PET_NNODES=1 in container \"trainer\"): NCCL_P2P_DISABLE=1 in "
                                  "container \"trainer\" turns P2P off"),
            std::string::npos) << formulaOf(noP2P);
  auto legacyIpc = shapeWith(env("NCCL_CUMEM_ENABLE", "0"), cluster);
  EXPECT_EQ(shmOf(legacyIpc), "7053Mi");
  EXPECT_NE(formulaOf(legacyIpc).find("NCCL_CUMEM_ENABLE=0 in container \"trainer\" makes NCCL use legacy CUDA IPC"),
            std::string::npos) << formulaOf(legacyIpc);
  EXPECT_EQ(shmOf(shapeWith(env("NCCL_CUMEM_ENABLE", "1"), cluster)), "6008Mi");
  // The last entry of a name wins, as the kubelet sets it; one set through valueFrom is
  // not known to be 1.
  auto twice = [&](json first, json last) {
    return shmOf(shapeWith(withNnodes("1")
                               .at("/spec/containers/0/env/1", std::move(first))
                               .at("/spec/containers/0/env/2", std::move(last)),
                           cluster));
  };
  const json p2pOff = {{"name", "NCCL_P2P_DISABLE"}, {"value", "1"}};
  const json p2pOn = {{"name", "NCCL_P2P_DISABLE"}, {"value", "0"}};
  const json p2pFrom = {{"name", "NCCL_P2P_DISABLE"}, {"valueFrom", {{"configMapKeyRef", {{"name", "n"}}}}}};
  EXPECT_EQ(twice(p2pOn, p2pOff), "8231Mi");
  EXPECT_EQ(twice(p2pOff, p2pOn), "6008Mi");
  EXPECT_EQ(twice(p2pOff, p2pFrom), "6008Mi");
  EXPECT_EQ(twice(json({{"name", "NCCL_CUMEM_ENABLE"}, {"value", "0"}}), p2pOff), "8231Mi");
}

TEST(PodShaper, APodSizedForP2PIsPlacedOnlyWhereEveryPairHasIt) {
  ClusterView cluster;
  cluster.nodes = {gpuNode("a", 8)};
  auto out = shapeWith(withNnodes("1"), cluster);
  ASSERT_TRUE(out.allowed) << out.message;
  const json& terms =
      out.pod["spec"]["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"];
  ASSERT_EQ(terms.size(), 1u);
  EXPECT_EQ(terms[0]["matchExpressions"].back(),
            json::parse(R"({"key":"podshaper.io/p2p","operator":"In","values":["all"]})"));
  // A job across nodes is sized for NET, which P2P does not change: no such term.
  auto across = shapeWith(TrainingPod(), cluster);
  EXPECT_EQ(across.pod["spec"]["affinity"]["nodeAffinity"].dump().find("podshaper.io/p2p"), std::string::npos);
  // Nor does a count too large for bytes overflow where the transport keeps nothing.
  auto many = shapeWith(withNnodes("1").annotate("podshaper.io/nccl-communicators", "2305843009213693952"), cluster);
  ASSERT_TRUE(many.allowed) << many.message;
  EXPECT_EQ(shmOf(many), "6008Mi");
}

TEST(PodShaper, RanksOfAJobAcrossNodesKeepTheNetPool) {
  ClusterView cluster;
  cluster.nodes = {gpuNode("a", 8)};
  for (const char* nnodes : {"4", "1:4"}) {
    auto out = shapeWith(withNnodes(nnodes), cluster);
    ASSERT_TRUE(out.allowed) << out.message;
    EXPECT_EQ(shmOf(out), "7053Mi") << nnodes;  // 6008 + 8 × 4 × 33412Ki → 1045Mi
    EXPECT_NE(formulaOf(out).find("(NET: the job spans nodes (PET_NNODES=" + std::string(nnodes) +
                                  " in container \"trainer\"), and NCCL's proxy keeps a pool"),
              std::string::npos) << formulaOf(out);
  }
  // A value the webhook cannot read is not one node.
  auto unknown = shapeWith(withNnodes("$(NNODES)"), cluster);
  ASSERT_TRUE(unknown.allowed) << unknown.message;
  EXPECT_EQ(shmOf(unknown), "7053Mi");
  EXPECT_NE(formulaOf(unknown).find("PET_NNODES=$(NNODES) in container \"trainer\" is not a node count"),
            std::string::npos) << formulaOf(unknown);
  TrainingPod fromField = TrainingPod().at(
      "/spec/containers/0/env",
      json::array({{{"name", "PET_NNODES"}, {"valueFrom", {{"fieldRef", {{"fieldPath", "metadata.labels['n']"}}}}}}}));
  EXPECT_NE(formulaOf(shapeWith(fromField, cluster)).find("PET_NNODES from valueFrom"), std::string::npos);
}

TEST(PodShaper, OneNodeWithoutP2PKeepsTheShmTransportsSegments) {
  ClusterView cluster;
  cluster.nodes = {gpuNode("a", 8, "partial")};
  auto out = shapeWith(withNnodes("1"), cluster);
  ASSERT_TRUE(out.allowed) << out.message;
  EXPECT_EQ(shmOf(out), "8231Mi");  // 6008 + 8 × 4 × 71108Ki → 2223Mi
  EXPECT_NE(formulaOf(out).find("× 71108Ki per rank per communicator = 2223Mi (SHM on one node (PET_NNODES=1 in "
                                "container \"trainer\"): P2P between all GPU pairs is not known to hold on the nodes the pod "
                                "may land on"),
            std::string::npos) << formulaOf(out);
  // One rank alone on one node talks to nobody.
  auto alone = shapeNoCluster(withNnodes("1").withGpus(1).annotate("podshaper.io/placement", "shared"));
  ASSERT_TRUE(alone.allowed) << alone.message;
  EXPECT_EQ(shmOf(alone), "751Mi");
  EXPECT_NE(formulaOf(alone).find("; no NCCL reserve (one rank on one node (PET_NNODES=1 in container \"trainer\"): "
                                  "NCCL connects to no peer)"),
            std::string::npos) << formulaOf(alone);
}

TEST(PodShaper, TheCommunicatorsAnnotationScalesTheReserve) {
  ClusterView cluster;
  cluster.nodes = {gpuNode("a", 8)};
  auto ddp = shapeWith(TrainingPod().annotate("podshaper.io/nccl-communicators", "1"), cluster);
  ASSERT_TRUE(ddp.allowed) << ddp.message;
  EXPECT_EQ(shmOf(ddp), "6270Mi");  // 6008 + 8 × 1 × 33412Ki → 262Mi
  EXPECT_NE(formulaOf(ddp).find("8 ranks × 1 communicator (podshaper.io/nccl-communicators) × 33412Ki"),
            std::string::npos) << formulaOf(ddp);
  EXPECT_FALSE(hasWarning(ddp, "podshaper.io/nccl-communicators not set"));
  auto megatron = shapeWith(TrainingPod().annotate("podshaper.io/nccl-communicators", "12"), cluster);
  EXPECT_EQ(shmOf(megatron), "9141Mi");  // 6008 + 8 × 12 × 33412Ki → 3133Mi
  auto none = shapeWith(TrainingPod().annotate("podshaper.io/nccl-communicators", "0"), cluster);
  EXPECT_EQ(shmOf(none), "6008Mi");
  EXPECT_NE(formulaOf(none).find("no NCCL reserve (podshaper.io/nccl-communicators is 0: the pod runs no NCCL)"),
            std::string::npos) << formulaOf(none);
  auto defaulted = shapeWith(TrainingPod(), cluster);
  EXPECT_TRUE(hasWarning(defaulted, "podshaper.io/nccl-communicators not set: using 4 from config "
                                    "defaults.ncclCommunicators"));
  // The admin's costs, for an older NCCL.
  Config older;
  older.shm.ncclShmPerCommunicator.net = 31108 * 1024;  // NCCL 2.25's pool
  EXPECT_EQ(shmOf(shapeWith(TrainingPod(), cluster, older)), "6981Mi");  // 6008 + 8 × 4 × 31108Ki → 973Mi
}

TEST(PodShaper, ABadCommunicatorsAnnotationIsDeniedByName) {
  for (const char* bad : {"-1", "four", "1.5", "", "99999999999999999999999"}) {
    auto out = shapeNoCluster(TrainingPod().annotate("podshaper.io/nccl-communicators", bad));
    EXPECT_FALSE(out.allowed) << bad;
    EXPECT_NE(out.message.find("annotation podshaper.io/nccl-communicators: "), std::string::npos) << out.message;
    EXPECT_NE(out.message.find("1 for DDP, 3 for a data × tensor parallel mesh"), std::string::npos) << out.message;
  }
  // A count that fits 64 bits but not the reserve: an overflow that names it, not a wrapped size.
  auto overflow = shapeNoCluster(TrainingPod().annotate("podshaper.io/nccl-communicators", "18446744073709551615"));
  EXPECT_FALSE(overflow.allowed);
  EXPECT_NE(overflow.message.find("overflows 64 bits: "), std::string::npos) << overflow.message;
  EXPECT_NE(overflow.message.find("18446744073709551615 communicators (podshaper.io/nccl-communicators)"),
            std::string::npos) << overflow.message;
  // A large one that fits is held to the node's memory.
  ClusterView cluster;
  cluster.nodes = {gpuNode("a", 8)};
  auto huge = shapeWith(TrainingPod().annotate("podshaper.io/nccl-communicators", "100000"), cluster);
  EXPECT_FALSE(huge.allowed);
  EXPECT_NE(huge.message.find("lower podshaper.io/dataloader-workers, podshaper.io/prefetch-factor, the batch size or "
                              "podshaper.io/nccl-communicators"),
            std::string::npos) << huge.message;
}

TEST(PodShaper, NoWorkersMeansNoBatchesInShm) {
  // workers 0: the batches stay in the training process; /dev/shm is the NCCL reserve,
  // and never below the runtime's 64Mi.
  auto out = shapeNoCluster(TrainingPod().annotate("podshaper.io/dataloader-workers", "0"));
  ASSERT_TRUE(out.allowed) << out.message;
  EXPECT_EQ(out.pod["metadata"]["annotations"]["podshaper.io/shm-size"], "2223Mi");  // 8 × 4 × 71108Ki
  Config config;
  config.podDefaults.ncclCommunicators = 0;
  auto bare = shapeNoCluster(TrainingPod().annotate("podshaper.io/dataloader-workers", "0"), config);
  ASSERT_TRUE(bare.allowed) << bare.message;
  EXPECT_EQ(bare.pod["metadata"]["annotations"]["podshaper.io/shm-size"], "64Mi");
  EXPECT_EQ(bare.pod["spec"]["containers"][0]["resources"]["limits"]["memory"], "102464Mi");
  // Nor is a batch size needed then; a bad one is still denied.
  TrainingPod noBatch = TrainingPod().annotate("podshaper.io/dataloader-workers", "0");
  noBatch.withoutAnnotation("podshaper.io/batch-shape").withoutAnnotation("podshaper.io/batch-dtype");
  auto unsized = shapeNoCluster(noBatch);
  ASSERT_TRUE(unsized.allowed) << unsized.message;
  EXPECT_EQ(unsized.pod["metadata"]["annotations"]["podshaper.io/shm-size"], "2223Mi");
  EXPECT_FALSE(shapeNoCluster(noBatch.annotate("podshaper.io/batch-bytes", "lots")).allowed);
  EXPECT_FALSE(
      shapeNoCluster(TrainingPod().annotate("podshaper.io/dataloader-workers", "1").withoutAnnotation("podshaper.io/batch-shape"))
          .allowed);
}

TEST(PodShaper, ClusterWithoutPodshaperLabelsLeavesNodeAffinityOut) {
  ClusterView cluster;
  cluster.nodes = {gpuNode("a", 8, "all", /*validated=*/false)};
  auto out = shapeWith(TrainingPod(), cluster);
  ASSERT_TRUE(out.allowed) << out.message;
  EXPECT_FALSE(out.pod["spec"]["affinity"].contains("nodeAffinity"));
  EXPECT_TRUE(out.pod["spec"]["affinity"].contains("podAntiAffinity"));
  EXPECT_TRUE(hasWarning(out, "no node carries podshaper.io/topology-validated yet"));
  EXPECT_EQ(out.pod["metadata"]["annotations"]["podshaper.io/shm-size"], "8231Mi");
}

TEST(PodShaper, GpuCountComesFromTheClustersNodeClasses) {
  ClusterView cluster;
  cluster.nodes = {gpuNode("l40s", 4), gpuNode("h100", 8)};
  auto four = shapeWith(TrainingPod().withGpus(4), cluster);
  ASSERT_TRUE(four.allowed) << four.message;
  EXPECT_NE(four.pod.dump().find(R"({"key":"podshaper.io/gpu-count","operator":"In","values":["4"]})"), std::string::npos);
  auto two = shapeWith(TrainingPod().withGpus(2), cluster);
  EXPECT_FALSE(two.allowed);
  EXPECT_NE(two.message.find("whole 4-GPU nodes"), std::string::npos) << two.message;
  auto sixteen = shapeWith(TrainingPod().withGpus(16), cluster);
  EXPECT_FALSE(sixteen.allowed);
  EXPECT_NE(sixteen.message.find("split the job into pods of 8 GPUs"), std::string::npos) << sixteen.message;
}

TEST(PodShaper, PartialNodePolicies) {
  Config config;
  auto denied = shapeNoCluster(TrainingPod().withGpus(4), config);
  EXPECT_FALSE(denied.allowed);
  EXPECT_EQ(denied.message,
            "podshaper: the pod asks 4 nvidia.com/gpu but node-exclusive pods own whole 8-GPU nodes "
            "(from config defaults.gpusPerNode): request 8 GPUs (one rank per GPU), or set "
            "podshaper.io/placement: shared to share the node");

  config.node.partialNode = PartialNodePolicy::kWarn;
  auto warned = shapeNoCluster(TrainingPod().withGpus(4), config);
  ASSERT_TRUE(warned.allowed);
  EXPECT_TRUE(hasWarning(warned, "the other GPUs stay idle"));
  EXPECT_EQ(warned.pod["spec"]["containers"][0]["resources"]["limits"]["nvidia.com/gpu"], "4");

  config.node.partialNode = PartialNodePolicy::kExpand;
  TrainingPod pod = TrainingPod().withGpus(4);
  pod.at("/spec/containers/0/env", json::array({{{"name", "PET_NPROC_PER_NODE"}, {"value", "4"}}}));
  auto expanded = shapeNoCluster(pod, config);
  ASSERT_TRUE(expanded.allowed) << expanded.message;
  const json& c = expanded.pod["spec"]["containers"][0];
  EXPECT_EQ(c["resources"]["limits"]["nvidia.com/gpu"], "8");
  EXPECT_FALSE(c["resources"]["requests"].contains("nvidia.com/gpu"));
  EXPECT_EQ(c["env"][0]["value"], "8");
  EXPECT_EQ(expanded.pod["metadata"]["annotations"]["podshaper.io/shm-size"], "8231Mi");
}

TEST(PodShaper, PodSecurityBaselineDeniesOrWarns) {
  ClusterView cluster;
  cluster.nodes = {gpuNode("a", 8)};
  cluster.namespaceLabels["ml"] = {{"pod-security.kubernetes.io/enforce", "baseline"}};
  auto denied = shapeWith(TrainingPod(), cluster);
  EXPECT_FALSE(denied.allowed);
  EXPECT_NE(denied.message.find("namespace \"ml\" enforces Pod Security level \"baseline\""), std::string::npos);
  EXPECT_NE(denied.message.find("label the namespace pod-security.kubernetes.io/enforce=privileged"), std::string::npos);

  Config warn;
  warn.podSecurity = PodSecurityAction::kWarn;
  auto warned = shapeWith(TrainingPod(), cluster, warn);
  ASSERT_TRUE(warned.allowed);
  EXPECT_FALSE(warned.pod["spec"].contains("hostIPC"));
  EXPECT_FALSE(warned.pod["spec"]["containers"][0].contains("securityContext"));
  EXPECT_EQ(warned.pod["metadata"]["annotations"]["podshaper.io/shm-size"], "7053Mi");
  EXPECT_TRUE(hasWarning(warned, "hostIPC and IPC_LOCK left out"));

  cluster.namespaceLabels["ml"] = {{"pod-security.kubernetes.io/enforce", "privileged"}};
  EXPECT_TRUE(shapeWith(TrainingPod(), cluster).allowed);
}

TEST(PodShaper, NamespaceOptedOutIsUntouched) {
  ClusterView cluster;
  cluster.namespaceLabels["ml"] = {{"podshaper.io/inject", "disabled"}};
  auto out = shapeWith(TrainingPod(), cluster);
  EXPECT_TRUE(out.allowed);
  EXPECT_EQ(out.pod, TrainingPod().json());
}

TEST(PodShaper, ShmAboveTheNodeCapIsDenied) {
  ClusterView cluster;
  cluster.nodes = {gpuNode("small", 8, "all", true, 8LL << 30)};  // 8Gi: cap 4Gi
  auto out = shapeWith(TrainingPod(), cluster);
  EXPECT_FALSE(out.allowed);
  EXPECT_NE(out.message.find("/dev/shm would be 7053Mi, above limits.maxShmPercentOfNodeMemory (50%) of the node's 8Gi"),
            std::string::npos) << out.message;
  Config config;
  config.node.nodeMemory = 8LL << 30;
  EXPECT_FALSE(shapeNoCluster(TrainingPod(), config).allowed);
}

TEST(PodShaper, DefaultsAreSaidInWarnings) {
  auto out = shapeNoCluster(TrainingPod()
                                .withoutAnnotation("podshaper.io/dataloader-workers")
                                .withoutAnnotation("podshaper.io/prefetch-factor")
                                .withoutAnnotation("podshaper.io/batch-dtype"));
  ASSERT_TRUE(out.allowed) << out.message;
  EXPECT_TRUE(hasWarning(out, "podshaper.io/dataloader-workers not set: using 4 from config defaults.workers"));
  EXPECT_TRUE(hasWarning(out, "podshaper.io/prefetch-factor not set: using 2"));
  EXPECT_TRUE(hasWarning(out, "podshaper.io/batch-dtype not set: using float32"));
  EXPECT_TRUE(hasWarning(out, "podshaper.io/ranks-per-pod not set: using 8"));
  EXPECT_TRUE(hasWarning(out, "podshaper.io/placement not set: using node-exclusive"));
}

TEST(PodShaper, ADefaultThatWorkersZeroMakesMootIsNotWarned) {
  // No workers: no prefetch, and a batch's dtype sizes nothing in /dev/shm.
  for (const char* from : {"annotation", "config"}) {
    SCOPED_TRACE(from);
    TrainingPod pod;
    pod.withoutAnnotation("podshaper.io/prefetch-factor").withoutAnnotation("podshaper.io/batch-dtype");
    Config config;
    if (std::string(from) == "annotation") pod.annotate("podshaper.io/dataloader-workers", "0");
    else config.podDefaults.workers = 0, pod.withoutAnnotation("podshaper.io/dataloader-workers");
    auto out = shapeNoCluster(pod, config);
    ASSERT_TRUE(out.allowed) << out.message;
    EXPECT_FALSE(hasWarning(out, "prefetch-factor")) << json(out.warnings);
    EXPECT_FALSE(hasWarning(out, "batch-dtype")) << json(out.warnings);
    const std::string kept = out.pod["metadata"]["annotations"]["podshaper.io/warnings"];
    EXPECT_EQ(kept.find("prefetch-factor"), std::string::npos) << kept;
    EXPECT_EQ(kept.find("batch-dtype"), std::string::npos) << kept;
  }
  // With workers they are said.
  auto out = shapeNoCluster(TrainingPod().annotate("podshaper.io/dataloader-workers", "1")
                                .withoutAnnotation("podshaper.io/prefetch-factor")
                                .withoutAnnotation("podshaper.io/batch-dtype"));
  EXPECT_TRUE(hasWarning(out, "podshaper.io/prefetch-factor not set: using 2"));
  EXPECT_TRUE(hasWarning(out, "podshaper.io/batch-dtype not set: using float32"));
}

TEST(PodShaper, OneGpuIsOneGpuInWords) {
  Config config;
  config.node.gpusPerNode = 1;
  auto out = shapeNoCluster(TrainingPod().withGpus(2), config);
  EXPECT_FALSE(out.allowed);
  EXPECT_NE(out.message.find("split the job into pods of 1 GPU each"), std::string::npos) << out.message;
  EXPECT_EQ(out.message.find("1 GPUs"), std::string::npos) << out.message;
  config.node.gpusPerNode = 2;
  config.node.partialNode = PartialNodePolicy::kDeny;
  auto one = shapeNoCluster(TrainingPod().withGpus(1), config);
  EXPECT_NE(one.message.find("the pod asks 1 nvidia.com/gpu but node-exclusive pods own whole 2-GPU nodes"),
            std::string::npos)
      << one.message;
}

struct BadInput {
  const char* description;
  TrainingPod pod;
  const char* messageContains;
};

class BadInputs : public ::testing::TestWithParam<BadInput> {};

TEST_P(BadInputs, AreDenialsThatSayWhatToChange) {
  auto out = shapeNoCluster(GetParam().pod);
  EXPECT_FALSE(out.allowed) << GetParam().description;
  EXPECT_NE(out.message.find(GetParam().messageContains), std::string::npos)
      << GetParam().description << ": " << out.message;
  EXPECT_TRUE(out.message.starts_with("podshaper: "));
}

INSTANTIATE_TEST_SUITE_P(
    Table, BadInputs,
    ::testing::Values(
        BadInput{"negative workers", TrainingPod().annotate("podshaper.io/dataloader-workers", "-1"),
                 "annotation podshaper.io/dataloader-workers: \"-1\" is negative; expected a non-negative integer; set it to the DataLoader's num_workers"},
        BadInput{"unparsable workers", TrainingPod().annotate("podshaper.io/dataloader-workers", "eight"),
                 "annotation podshaper.io/dataloader-workers: \"eight\" is not a non-negative integer"},
        BadInput{"overflowing workers", TrainingPod().annotate("podshaper.io/dataloader-workers", "99999999999999999999"),
                 "podshaper.io/dataloader-workers: \"99999999999999999999\" is too large"},
        BadInput{"zero prefetch", TrainingPod().annotate("podshaper.io/prefetch-factor", "0"),
                 "podshaper.io/prefetch-factor: \"0\" must be at least 1"},
        BadInput{"zero ranks", TrainingPod().annotate("podshaper.io/ranks-per-pod", "0"),
                 "podshaper.io/ranks-per-pod: \"0\" must be at least 1"},
        BadInput{"bad batch quantity", TrainingPod().withoutAnnotation("podshaper.io/batch-shape").annotate("podshaper.io/batch-bytes", "12Qi"),
                 "annotation podshaper.io/batch-bytes: \"12Qi\" is not a quantity"},
        BadInput{"negative batch bytes", TrainingPod().withoutAnnotation("podshaper.io/batch-shape").annotate("podshaper.io/batch-bytes", "-5Mi"),
                 "podshaper.io/batch-bytes: \"-5Mi\" is negative"},
        BadInput{"zero batch bytes", TrainingPod().withoutAnnotation("podshaper.io/batch-shape").annotate("podshaper.io/batch-bytes", "0"),
                 "podshaper.io/batch-bytes: \"0\" is zero"},
        BadInput{"unknown dtype", TrainingPod().annotate("podshaper.io/batch-dtype", "float8"),
                 "annotation podshaper.io/batch-dtype: unknown dtype \"float8\""},
        BadInput{"bad shape", TrainingPod().annotate("podshaper.io/batch-shape", "32x3xabc"),
                 "annotation podshaper.io/batch-shape: shape \"32x3xabc\""},
        BadInput{"no batch at all", TrainingPod().withoutAnnotation("podshaper.io/batch-shape"),
                 "does not say how large a DataLoader batch is"},
        BadInput{"both batch forms", TrainingPod().annotate("podshaper.io/batch-bytes", "1Mi"),
                 "are both set; keep only one"},
        BadInput{"integer overflow in the formula", TrainingPod().annotate("podshaper.io/dataloader-workers", "4294967296").annotate("podshaper.io/prefetch-factor", "4294967296"),
                 "overflows 64 bits"},
        BadInput{"overflow in batch shape", TrainingPod().annotate("podshaper.io/batch-shape", "4294967296x4294967296"),
                 "overflows 64 bits"},
        BadInput{"unknown placement", TrainingPod().annotate("podshaper.io/placement", "exclusive"),
                 "podshaper.io/placement: \"exclusive\" is not a placement; use node-exclusive or shared"},
        BadInput{"bad gpu quantity", TrainingPod().at("/spec/containers/0/resources/limits/nvidia.com~1gpu", "two"),
                 "container \"trainer\": resources.limits[nvidia.com/gpu]"},
        BadInput{"bad memory limit", TrainingPod().at("/spec/containers/0/resources/limits/memory", "lots"),
                 "container \"trainer\" resources.limits.memory \"lots\" is not a quantity"},
        BadInput{"memory limit overflow", TrainingPod().at("/spec/containers/0/resources/limits/memory", "9223372036854775807"),
                 "resources.limits.memory overflows"},
        BadInput{"fewer GPUs than the node", TrainingPod().withGpus(1), "request 8 GPUs"},
        BadInput{"bad nodeSelector gpu-count", TrainingPod().at("/spec/nodeSelector", {{"podshaper.io/gpu-count", "x"}}),
                 "nodeSelector podshaper.io/gpu-count"},
        BadInput{"containers not an array", TrainingPod().at("/spec/containers", "x"), "spec.containers is missing"},
        BadInput{"gpu-count with leading zeros (the scheduler compares strings)",
                 TrainingPod().at("/spec/nodeSelector", json{{"podshaper.io/gpu-count", "00008"}}),
                 "nodeSelector podshaper.io/gpu-count: \"00008\" matches no node podshaper labels"}),
    [](const auto& info) {
      std::string name = info.param.description;
      for (char& ch : name) if (!isalnum(static_cast<unsigned char>(ch))) ch = '_';
      return name;
    });

// The metric's cause: the step that refused the pod.
TEST(PodShaper, EachDenialSaysItsCause) {
  EXPECT_EQ(toString(shapeNoCluster(TrainingPod().annotate("podshaper.io/batch-dtype", "fp8")).cause), "input");
  EXPECT_EQ(toString(shapeNoCluster(TrainingPod().withGpus(4)).cause), "node-size");
  EXPECT_EQ(toString(shapeNoCluster(json::array()).cause), "not-a-pod");
  Config small;
  small.node.nodeMemory = 8LL << 30;
  EXPECT_EQ(toString(shapeNoCluster(TrainingPod(), small).cause), "shm-cap");
  EXPECT_EQ(toString(shapeNoCluster(TrainingPod().at("/spec/volumes", json::array({{{"name", "podshaper-dshm"}}}))).cause),
            "volume-name");
  EXPECT_EQ(toString(shapeNoCluster(TrainingPod()).cause), "");  // allowed: none
  std::vector<std::string_view> known;
  for (DenialCause cause : kDenialCauses) known.push_back(toString(cause));
  for (const char* c : {"input", "node-size", "not-a-pod", "shm-cap", "volume-name"}) {
    EXPECT_NE(std::find(known.begin(), known.end(), c), known.end()) << c;
  }
}

}  // namespace
}  // namespace podshaper
