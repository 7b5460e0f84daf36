// Hostile and careless pods (docs/webhook.md "Limits"): what podshaper reads is bounded,
// what it writes stays inside the API server's limits, and what it decides agrees with
// itself. Each test is one class of input; bench/admission_cost measures the cost of the
// large ones.
#include <gtest/gtest.h>

#include "base/text.h"
#include "pod_builder.h"
#include "shaping/pod_shaper.h"
#include "shaping/request_limits.h"

namespace podshaper {
namespace {

using nlohmann::json;
using testing::gpuNode;
using testing::TrainingPod;

ShapeOutcome shape(const json& pod, const ClusterView* cluster = nullptr) {
  AdmissionContext ctx;
  ctx.namespaceName = "ml";
  ctx.cluster = cluster;
  return shapePod(pod, Config(), ctx);
}

bool has(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

bool warned(const ShapeOutcome& out, const std::string& part) {
  for (const auto& w : out.warnings) {
    if (has(w, part)) return true;
  }
  return false;
}

const std::string kUlimitKey = "ulimits.noderesource.dev/container.trainer";

// --- cost bounded by limits on what podshaper reads

TEST(Hostile, AHugeUlimitAnnotationIsDeniedByNameBeforeItIsParsed) {
  std::string yaml;
  while (yaml.size() <= kMaxUlimitAnnotationBytes) yaml += "- type: RLIMIT_NOFILE\n  soft: 1\n  hard: 1\n";
  auto out = shape(TrainingPod().annotate(kUlimitKey, yaml));
  EXPECT_FALSE(out.allowed);
  EXPECT_TRUE(has(out.message, "annotation " + kUlimitKey + " is ")) << out.message;
  EXPECT_TRUE(has(out.message, "at most 4Ki (4096 B)")) << out.message;
  // Within the limit it is read and extended as before.
  auto small = shape(TrainingPod().annotate(kUlimitKey, "- type: RLIMIT_NOFILE\n  soft: 1\n  hard: 1\n"));
  ASSERT_TRUE(small.allowed) << small.message;
  EXPECT_TRUE(has(small.pod["metadata"]["annotations"][kUlimitKey], "RLIMIT_MEMLOCK"));
}

TEST(Hostile, AnnotationsTheApiServerWouldRefuseAreDeniedFirst) {
  auto out = shape(TrainingPod().annotate("example.com/blob", std::string(kApiAnnotationsLimit, 'x')));
  EXPECT_FALSE(out.allowed);
  EXPECT_TRUE(has(out.message, "metadata.annotations hold 262288 B (256.1 KiB) in all")) << out.message;
  EXPECT_TRUE(has(out.message, "above the API server's limit of 256Ki (262144 B)")) << out.message;
}

TEST(Hostile, ManyNodeSelectorTermsAreDeniedNamingTheField) {
  ClusterView cluster;
  cluster.nodes = {gpuNode("a", 8)};
  auto withTerms = [](std::size_t terms, std::size_t expressions) {
    json list = json::array();
    for (std::size_t i = 0; i < terms; ++i) {
      json exprs = json::array();
      for (std::size_t e = 0; e < expressions; ++e) {
        exprs.push_back({{"key", "k" + std::to_string(e)}, {"operator", "Exists"}});
      }
      list.push_back({{"matchExpressions", exprs}});
    }
    return TrainingPod().at("/spec/affinity/nodeAffinity/requiredDuringSchedulingIgnoredDuringExecution",
                            json{{"nodeSelectorTerms", list}});
  };
  auto many = shape(withTerms(kMaxSelectorTerms + 1, 1), &cluster);
  EXPECT_FALSE(many.allowed);
  EXPECT_TRUE(has(many.message, "nodeSelectorTerms has 65 terms; podshaper adds its node requirements to each and "
                                "takes at most 64")) << many.message;
  auto wide = shape(withTerms(1, kMaxTermRequirements + 1), &cluster);
  EXPECT_FALSE(wide.allowed);
  EXPECT_TRUE(has(wide.message, "nodeSelectorTerms[0] has 65 requirements")) << wide.message;
  EXPECT_TRUE(shape(withTerms(kMaxSelectorTerms, 4), &cluster).allowed);
  EXPECT_TRUE(shape(withTerms(4, kMaxTermRequirements), &cluster).allowed);
  // Few terms, long values: the bytes podshaper would copy are bounded too.
  auto big = shape(TrainingPod().at(
                       "/spec/affinity/nodeAffinity/requiredDuringSchedulingIgnoredDuringExecution",
                       json{{"nodeSelectorTerms",
                             json::array({{{"matchExpressions", json::array({{{"key", "zone"},
                                                                              {"operator", "In"},
                                                                              {"values", json::array({std::string(40000, 'z')})}}})}}})}}),
                   &cluster);
  EXPECT_FALSE(big.allowed);
  EXPECT_TRUE(has(big.message, "nodeSelectorTerms hold 40004 B (39.1 KiB) of keys and values")) << big.message;
  EXPECT_TRUE(has(big.message, "takes at most 16Ki (16384 B)")) << big.message;
  // Without podshaper's node labels on any node the terms are not rewritten, so not limited.
  ClusterView unlabelled;
  unlabelled.nodes = {gpuNode("a", 8, "all", /*validated=*/false)};
  auto untouched = shape(withTerms(kMaxSelectorTerms + 1, 1), &unlabelled);
  EXPECT_TRUE(untouched.allowed) << untouched.message;
}

TEST(Hostile, MoreGpuContainersThanTheLimitAreDenied) {
  TrainingPod pod;
  json containers = json::array();
  for (std::size_t i = 0; i <= kMaxGpuContainers; ++i) {
    containers.push_back({{"name", "c" + std::to_string(i)},
                          {"image", "x"},
                          {"resources", {{"limits", {{"nvidia.com/gpu", "1"}}}}}});
  }
  pod.at("/spec/containers", containers).annotate("podshaper.io/placement", "shared");
  auto out = shape(pod);
  EXPECT_FALSE(out.allowed);
  EXPECT_TRUE(has(out.message, "container \"c64\" is GPU container 65 of the pod; podshaper shapes at most 64"))
      << out.message;
}

TEST(Hostile, ABatchShapeOfManyDimensionsIsDeniedByName) {
  std::string shape17 = "2";
  for (int i = 0; i < 16; ++i) shape17 += "x1";
  auto out = shape(TrainingPod().annotate("podshaper.io/batch-shape", shape17));
  EXPECT_FALSE(out.allowed);
  EXPECT_TRUE(has(out.message, "annotation podshaper.io/batch-shape: shape \"2x1x1")) << out.message;
  EXPECT_TRUE(has(out.message, "has 17 dimensions; at most 16")) << out.message;
  // A long value is quoted cut, not whole.
  std::string longShape(100000, '9');
  auto cut = shape(TrainingPod().annotate("podshaper.io/batch-shape", longShape));
  EXPECT_FALSE(cut.allowed);
  EXPECT_LT(cut.message.size(), 1000u) << cut.message.size();
}

TEST(Hostile, CommandWordsDoNotGrowWithoutBoundThroughEnvExpansion) {
  // $(A) in a command word is expanded from the env, as the kubelet does: a small pod
  // whose args repeat $(BIG) must not cost the webhook gigabytes.
  std::string args;
  for (int i = 0; i < 20000; ++i) args += "$(BIG)";
  auto out = shape(TrainingPod()
                       .at("/spec/containers/0/env", json::array({{{"name", "BIG"}, {"value", std::string(100000, 'x')}}}))
                       .at("/spec/containers/0/args", json::array({"--nnodes=" + args})));
  ASSERT_TRUE(out.allowed) << out.message;
  EXPECT_LT(out.pod["metadata"]["annotations"]["podshaper.io/shm-formula"].get<std::string>().size(), 2000u);
}

TEST(Hostile, ContainerNamesTheApiServerWouldRefuseAreDeniedFirst) {
  auto twice = shape(TrainingPod().withContainer({{"name", "trainer"}, {"image", "x"}}));
  EXPECT_FALSE(twice.allowed);
  EXPECT_TRUE(has(twice.message, "two containers are named \"trainer\"")) << twice.message;
  auto longName = shape(TrainingPod().at("/spec/containers/0/name", std::string(100000, 'n')));
  EXPECT_FALSE(longName.allowed);
  EXPECT_TRUE(has(longName.message, "is 100000 bytes; the API server takes at most 63")) << longName.message;
  EXPECT_LT(longName.message.size(), 300u);
}

TEST(Hostile, PodshapersOwnAnnotationsAreReadUpToAFewHundredBytes) {
  auto out = shape(TrainingPod()
                       .withoutAnnotation("podshaper.io/batch-shape")
                       .annotate("podshaper.io/batch-bytes", std::string(300, '0') + "18Mi"));
  EXPECT_FALSE(out.allowed);
  EXPECT_TRUE(has(out.message, "annotation podshaper.io/batch-bytes is 304 B; podshaper reads at most 256 B"))
      << out.message;
}

TEST(Hostile, TheUlimitAnnotationsTogetherAreBounded) {
  std::string yaml;
  while (yaml.size() < 3 * 1024) yaml += "- type: RLIMIT_NOFILE\n  soft: 1\n  hard: 1\n";
  auto out = shape(TrainingPod()
                       .withGpus(4)
                       .withContainer({{"name", "second"}, {"image", "x"},
                                       {"resources", {{"limits", {{"nvidia.com/gpu", "4"}}}}}})
                       .annotate(kUlimitKey, yaml)
                       .annotate("ulimits.noderesource.dev/container.second", yaml));
  EXPECT_FALSE(out.allowed);
  EXPECT_TRUE(has(out.message, "the pod's NRI ulimit annotations (ulimits.noderesource.dev/container.<name>) hold more "
                               "than 4Ki (4096 B) in all")) << out.message;
}

TEST(Hostile, AShapedManifestWithAMemlockQuantityIsNotMultipliedAgain) {
  ClusterView cluster;
  cluster.nodes = {gpuNode("a", 8)};
  cluster.nodes[0].labels.set("podshaper.io/memlock", "8388608");
  Config config;
  config.node.memlock = MemlockLimit{4 << 20};
  AdmissionContext ctx;
  ctx.namespaceName = "ml";
  ctx.cluster = &cluster;
  auto first = shapePod(TrainingPod(), config, ctx);
  ASSERT_TRUE(first.allowed) << first.message;
  const json& terms =
      first.pod["spec"]["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"];
  ASSERT_EQ(terms.size(), 2u);  // memlock unlimited, or at least 4Mi
  json stripped = first.pod;
  stripped["metadata"]["annotations"].erase("podshaper.io/shaped-by");
  auto again = shapePod(stripped, config, ctx);
  ASSERT_TRUE(again.allowed) << again.message;
  EXPECT_EQ(again.pod["spec"]["affinity"], first.pod["spec"]["affinity"]);
}

// --- never allowed, then refused by the API server for what podshaper added

TEST(Hostile, PodshapersAnnotationsStayWithinTheApiServersLimit) {
  // How much podshaper adds to this pod, with and without its warnings annotation.
  auto sized = shape(TrainingPod());
  ASSERT_TRUE(sized.allowed);
  const std::size_t before = annotationsBytes(TrainingPod().json());
  const std::size_t after = annotationsBytes(sized.pod);
  const std::string warnings = sized.pod["metadata"]["annotations"]["podshaper.io/warnings"];
  const std::size_t warningsBytes = std::string("podshaper.io/warnings").size() + warnings.size();
  const std::string padKey = "example.com/pad";
  auto padded = [&](std::size_t total) {
    return TrainingPod().annotate(padKey, std::string(total - before - padKey.size(), 'x'));
  };
  // Room for all but the warnings: the warnings annotation is left out, the pod allowed.
  auto tight = shape(padded(kApiAnnotationsLimit - (after - before) + warningsBytes));
  ASSERT_TRUE(tight.allowed) << tight.message;
  EXPECT_FALSE(tight.pod["metadata"]["annotations"].contains("podshaper.io/warnings"));
  EXPECT_LE(annotationsBytes(tight.pod), kApiAnnotationsLimit);
  EXPECT_FALSE(tight.warnings.empty());  // still in the create response
  // No room for podshaper's own: denied, naming them and the limit.
  auto over = shape(padded(kApiAnnotationsLimit - 10));
  EXPECT_FALSE(over.allowed);
  EXPECT_TRUE(has(over.message, "the annotations podshaper adds (podshaper.io/shm-formula ")) << over.message;
  EXPECT_TRUE(has(over.message, "above the API server's limit of 256Ki (262144 B)")) << over.message;
}

// --- the cap check and a size no node has

TEST(Hostile, ASharedPodAskingMoreGpusThanAnyNodeIsDeniedNamingTheLargest) {
  ClusterView cluster;
  cluster.nodes = {gpuNode("a", 8), gpuNode("b", 8), gpuNode("c", 4)};
  auto out = shape(TrainingPod().withGpus(64).annotate("podshaper.io/placement", "shared"), &cluster);
  EXPECT_FALSE(out.allowed);
  EXPECT_TRUE(has(out.message, "the pod asks 64 nvidia.com/gpu but no node has that many: the cluster's GPU nodes "
                               "have 8 GPUs (2 nodes) or 4 (1 node): split the job into pods of at most 8 GPUs each"))
      << out.message;
}

TEST(Hostile, TheCapIsCheckedAgainstNodesThatWaitToBeValidated) {
  // A shared pod asking 8 where the 8-GPU nodes are not validated now: it waits, and its
  // /dev/shm is still held to those nodes' memory.
  ClusterView cluster;
  cluster.nodes = {gpuNode("small", 4), gpuNode("big", 8, "all", /*validated=*/false, 8LL << 30)};
  cluster.nodes[1].labels.set("podshaper.io/topology-validated", "false");
  cluster.nodes[1].labels.set("podshaper.io/gpu-count", "8");
  auto out = shape(TrainingPod().withGpus(8).annotate("podshaper.io/placement", "shared"), &cluster);
  EXPECT_FALSE(out.allowed);
  EXPECT_TRUE(has(out.message, "above limits.maxShmPercentOfNodeMemory")) << out.message;
  EXPECT_TRUE(has(out.message, "of the node's 8Gi")) << out.message;
  auto small = shape(TrainingPod().withGpus(8).annotate("podshaper.io/placement", "shared")
                         .annotate("podshaper.io/dataloader-workers", "0")
                         .annotate("podshaper.io/nccl-communicators", "0"), &cluster);
  ASSERT_TRUE(small.allowed) << small.message;
  EXPECT_TRUE(warned(small, "no node with at least 8 GPUs can take the pod now: big (not validated")) << small.warnings[0];
  EXPECT_FALSE(warned(small, "node memory unknown"));
}

// --- paths and labels compared as the kubelet and the scheduler compare them

TEST(Hostile, AUserMountAtDevShmIsSeenHoweverThePathIsWritten) {
  for (const char* path : {"/dev/shm", "/dev//shm", "/dev/shm/.", "/dev/shm/", "/dev/x/../shm", "//dev/shm"}) {
    auto out = shape(TrainingPod()
                         .at("/spec/volumes", json::array({{{"name", "mine"}, {"emptyDir", {{"medium", "Memory"}}}}}))
                         .at("/spec/containers/0/volumeMounts", json::array({{{"name", "mine"}, {"mountPath", path}}})));
    ASSERT_TRUE(out.allowed) << path << ": " << out.message;
    EXPECT_EQ(out.pod["spec"]["containers"][0]["volumeMounts"].size(), 1u) << path;
    EXPECT_EQ(out.pod["spec"]["volumes"].size(), 1u) << path;
  }
  EXPECT_EQ(cleanPath("/dev/shm/sub"), "/dev/shm/sub");
  EXPECT_EQ(cleanPath("dev/shm"), "/dev/shm");
  EXPECT_EQ(cleanPath("/../.."), "/");
}

TEST(Hostile, AGpuCountSelectorIsReadAsTheSchedulerReadsIt) {
  ClusterView cluster;
  cluster.nodes = {gpuNode("a", 8)};
  for (const char* bad : {"00008", "+8", "8 ", "0x8", "8.0"}) {
    auto out = shape(TrainingPod().at("/spec/nodeSelector", json{{"podshaper.io/gpu-count", bad}}), &cluster);
    EXPECT_FALSE(out.allowed) << bad;
    EXPECT_TRUE(has(out.message, "matches no node podshaper labels")) << out.message;
  }
  auto good = shape(TrainingPod().at("/spec/nodeSelector", json{{"podshaper.io/gpu-count", "8"}}), &cluster);
  EXPECT_TRUE(good.allowed) << good.message;
  // A node labelled "08" by hand matches no "In [8]": it is not a node of 8 to place on.
  ClusterView handLabelled;
  handLabelled.nodes = {gpuNode("a", 8), gpuNode("b", 4)};
  handLabelled.nodes[0].labels.set("podshaper.io/gpu-count", "08");
  auto out = shape(TrainingPod(), &handLabelled);
  EXPECT_TRUE(out.allowed) << out.message;
  EXPECT_TRUE(warned(out, "no node with 8 GPUs can take the pod now: a (")) << out.warnings.front();
}

TEST(Hostile, AVolumeWithPodshapersNameIsNotTakenForPodshapers) {
  auto out = shape(TrainingPod().at("/spec/volumes", json::array({{{"name", "podshaper-dshm"}, {"emptyDir", json::object()}}})));
  EXPECT_FALSE(out.allowed);
  EXPECT_TRUE(has(out.message, "spec.volumes has a volume named \"podshaper-dshm\"")) << out.message;
  EXPECT_TRUE(has(out.message, "rename it")) << out.message;
  // What podshaper wrote (podshaper.io/shaped-by) is what says a pod is shaped.
  auto shaped = shape(TrainingPod().annotate("podshaper.io/shaped-by", "podshaper-webhook/0.1.0 config=x"));
  EXPECT_TRUE(shaped.allowed);
  EXPECT_EQ(shaped.pod, TrainingPod().annotate("podshaper.io/shaped-by", "podshaper-webhook/0.1.0 config=x").json());
}

// --- several GPU containers agree

TEST(Hostile, ContainersSharingTheVolumeAndOneWithItsOwnAgree) {
  json own = {{"name", "second"},
              {"image", "x"},
              {"resources", {{"limits", {{"nvidia.com/gpu", "4"}, {"memory", "10Gi"}}}}},
              {"volumeMounts", json::array({{{"name", "mine"}, {"mountPath", "/dev/shm"}}})}};
  TrainingPod pod;
  pod.withGpus(4)
      .withContainer(own)
      .at("/spec/volumes", json::array({{{"name", "mine"}, {"emptyDir", {{"medium", "Memory"}, {"sizeLimit", "1Gi"}}}}}));
  auto whole = shape(TrainingPod());  // the same ranks, one container of 8 GPUs
  auto out = shape(pod);
  ASSERT_TRUE(out.allowed) << out.message;
  const std::string total = whole.pod["metadata"]["annotations"]["podshaper.io/shm-size"];
  ASSERT_EQ(total, "8231Mi");
  // podshaper's volume holds the first container's half (8231Mi / 2, rounded up to a MiB);
  // its memory is raised by that.
  const json& volumes = out.pod["spec"]["volumes"];
  ASSERT_EQ(volumes.size(), 2u);
  EXPECT_EQ(volumes[1]["emptyDir"]["sizeLimit"], "4116Mi") << total;
  EXPECT_EQ(out.pod["metadata"]["annotations"]["podshaper.io/shm-size"], "4116Mi");
  EXPECT_EQ(out.pod["spec"]["containers"][0]["resources"]["limits"]["memory"], "106516Mi");  // 100Gi + 4116Mi
  EXPECT_EQ(out.pod["spec"]["containers"][1]["resources"]["limits"]["memory"], "10Gi");
  EXPECT_TRUE(has(out.pod["metadata"]["annotations"]["podshaper.io/shm-formula"],
                  "podshaper's /dev/shm serves the containers holding 4 of the pod's 8 GPUs"));
  // The other's own volume is held to its own half, not the pod's whole.
  EXPECT_TRUE(warned(out, "container \"second\" keeps its own /dev/shm, emptyDir \"mine\" (medium Memory, sizeLimit "
                          "1Gi), smaller than the 4116Mi its ranks need"));
  EXPECT_TRUE(has(out.pod["metadata"]["annotations"]["podshaper.io/shm-formula"],
                  "; container \"second\" (4 GPUs, 4116Mi of the need): /dev/shm is the pod's own emptyDir \"mine\""));
}

// --- words, never a library's

TEST(Hostile, MalformedFieldsNeverReachTheUserAsLibraryText) {
  const std::vector<std::pair<std::string, json>> cases = {
      {"/spec/containers/0/volumeMounts", json::array({5})},
      {"/spec/containers/0/volumeMounts", json::array({{{"mountPath", 5}}})},
      {"/spec/containers/0/env", json::array({5, "x", nullptr})},
      {"/spec/containers/0/env", json::array({{{"name", 5}}})},
      {"/spec/volumes", json::array({1, {{"name", 2}}})},
      {"/spec/containers/0/name", 5},
      {"/spec/containers/0/resources/limits/memory", json::array()},
      {"/spec/affinity", 5},
      {"/spec/affinity/nodeAffinity/requiredDuringSchedulingIgnoredDuringExecution/nodeSelectorTerms", 5},
      {"/spec/containers/0/securityContext", 5},
      {"/metadata/annotations/podshaper.io~1shaped-by", 5},
  };
  ClusterView cluster;
  cluster.nodes = {gpuNode("a", 8)};
  for (const auto& [pointer, value] : cases) {
    auto out = shape(TrainingPod().at(pointer, value), &cluster);
    EXPECT_FALSE(has(out.message, "json.exception")) << pointer << ": " << out.message;
    EXPECT_FALSE(has(out.message, "[json")) << pointer << ": " << out.message;
  }
}

TEST(Hostile, AnOverflowNamesTheGpuCountWhenItIsTheCause) {
  auto out = shape(TrainingPod().withGpus(0).at("/spec/containers/0/resources/limits/nvidia.com~1gpu",
                                                "1099511627776").annotate("podshaper.io/placement", "shared"));
  EXPECT_FALSE(out.allowed);
  EXPECT_TRUE(has(out.message, "overflows 64 bits: 1099511627776 ranks (the pod's nvidia.com/gpu)")) << out.message;
}

}  // namespace
}  // namespace podshaper
