// GPUs asked through Dynamic Resource Allocation: a pod whose GPUs come from
// ResourceClaimTemplates or ResourceClaims is shaped as its nvidia.com/gpu twin.

#include "shaping/pod_claims.h"

#include <gtest/gtest.h>

#include "pod_builder.h"
#include "shaping/pod_shaper.h"

namespace podshaper {
namespace {

using nlohmann::json;
using testing::gpuNode;
using testing::TrainingPod;

json exactly(const std::string& name, int count, const std::string& deviceClass = "gpu.nvidia.com") {
  return {{"name", name}, {"exactly", {{"deviceClassName", deviceClass}, {"count", count}}}};
}

json allOf(const std::string& name) {
  return {{"name", name}, {"exactly", {{"deviceClassName", "gpu.nvidia.com"}, {"allocationMode", "All"}}}};
}

json claimTemplate(const std::string& name, json requests, const std::string& ns = "ml") {
  return {{"apiVersion", "resource.k8s.io/v1"},
          {"kind", "ResourceClaimTemplate"},
          {"metadata", {{"name", name}, {"namespace", ns}}},
          {"spec", {{"spec", {{"devices", {{"requests", std::move(requests)}}}}}}}};
}

json resourceClaim(const std::string& name, json requests) {
  return {{"apiVersion", "resource.k8s.io/v1"},
          {"kind", "ResourceClaim"},
          {"metadata", {{"name", name}, {"namespace", "ml"}}},
          {"spec", {{"devices", {{"requests", std::move(requests)}}}}}};
}

// The seed training pod with its GPUs from the pod claim `gpus`, which names `templateName`.
TrainingPod draPod(const std::string& templateName = "eight-gpus") {
  TrainingPod pod;
  pod.without("/spec/containers/0/resources/limits/nvidia.com~1gpu")
      .at("/spec/resourceClaims", json::array({{{"name", "gpus"}, {"resourceClaimTemplateName", templateName}}}))
      .at("/spec/containers/0/resources/claims", json::array({{{"name", "gpus"}}}));
  return pod;
}

ClusterView eightGpuNodes() {
  ClusterView cluster;
  cluster.nodes = {gpuNode("h100-a", 8), gpuNode("h100-b", 8)};
  return cluster;
}

ShapeOutcome shapeWithClaims(const json& pod, const ClusterView* cluster, const std::vector<json>& claims,
                             Config config = {}) {
  AdmissionContext ctx;
  ctx.namespaceName = "ml";
  ctx.cluster = cluster;
  ctx.claims = claimLookupOver(claims);
  return shapePod(pod, config, ctx);
}

bool hasWarning(const ShapeOutcome& out, const std::string& part) {
  for (const auto& w : out.warnings) {
    if (w.find(part) != std::string::npos) return true;
  }
  return false;
}

// What podshaper adds, without the GPU request itself (the one difference between twins,
// with the words for it in the warnings).
json shapedParts(json pod) {
  pod["spec"].erase("resourceClaims");
  pod["metadata"]["annotations"].erase("podshaper.io/warnings");
  json& resources = pod["spec"]["containers"][0]["resources"];
  resources.erase("claims");
  resources["limits"].erase("nvidia.com/gpu");
  return pod;
}

TEST(PodClaims, AnEightGpuTemplatePodIsShapedAsItsNvidiaGpuTwin) {
  ClusterView cluster = eightGpuNodes();
  auto dra = shapeWithClaims(draPod(), &cluster, {claimTemplate("eight-gpus", json::array({exactly("gpu", 8)}))});
  auto twin = shapeWithClaims(TrainingPod(), &cluster, {});
  ASSERT_TRUE(dra.allowed) << dra.message;
  ASSERT_TRUE(twin.allowed) << twin.message;
  EXPECT_EQ(dra.pod["metadata"]["annotations"]["podshaper.io/shm-size"], "7053Mi");
  EXPECT_EQ(shapedParts(dra.pod), shapedParts(twin.pod));
  EXPECT_EQ(dra.pod["spec"]["resourceClaims"], draPod().json()["spec"]["resourceClaims"]);  // kept
  EXPECT_TRUE(hasWarning(dra, "podshaper.io/ranks-per-pod not set: using 8, the pod's GPUs")) << json(dra.warnings);
}

TEST(PodClaims, AResourceClaimCountsAsATemplateDoes) {
  ClusterView cluster = eightGpuNodes();
  TrainingPod pod = draPod();
  pod.at("/spec/resourceClaims/0", json{{"name", "gpus"}, {"resourceClaimName", "shared-eight"}});
  auto out = shapeWithClaims(pod, &cluster, {resourceClaim("shared-eight", json::array({exactly("gpu", 8)}))});
  ASSERT_TRUE(out.allowed) << out.message;
  EXPECT_EQ(out.pod["metadata"]["annotations"]["podshaper.io/shm-size"], "7053Mi");
}

TEST(PodClaims, AllocationModeAllIsEveryGpuOfTheNodeClass) {
  ClusterView cluster = eightGpuNodes();
  auto out = shapeWithClaims(draPod("whole-node"), &cluster, {claimTemplate("whole-node", json::array({allOf("gpu")}))});
  ASSERT_TRUE(out.allowed) << out.message;
  EXPECT_EQ(out.pod["metadata"]["annotations"]["podshaper.io/shm-size"], "7053Mi");
  EXPECT_TRUE(hasWarning(out, "allocationMode All): counted as 8")) << json(out.warnings);
  EXPECT_EQ(out.pod["spec"]["containers"][0]["env"][0], (json{{"name", "PET_NPROC_PER_NODE"}, {"value", "8"}}));
}

TEST(PodClaims, AllocationModeAllOnMixedNodesTakesTheLargestClassAndSaysSo) {
  ClusterView cluster;
  cluster.nodes = {gpuNode("l4-a", 4), gpuNode("h100-a", 8)};
  auto out = shapeWithClaims(draPod("whole-node"), &cluster, {claimTemplate("whole-node", json::array({allOf("gpu")}))});
  ASSERT_TRUE(out.allowed) << out.message;
  EXPECT_TRUE(hasWarning(out, "shaped for the largest, 8; set nodeSelector podshaper.io/gpu-count")) << json(out.warnings);
  // And the pod names its class: 4.
  TrainingPod four = draPod("whole-node");
  four.at("/spec/nodeSelector", json{{"podshaper.io/gpu-count", "4"}});
  out = shapeWithClaims(four, &cluster, {claimTemplate("whole-node", json::array({allOf("gpu")}))});
  ASSERT_TRUE(out.allowed) << out.message;
  EXPECT_TRUE(hasWarning(out, "counted as 4")) << json(out.warnings);
}

TEST(PodClaims, AMissingTemplateIsDeniedByName) {
  ClusterView cluster = eightGpuNodes();
  auto out = shapeWithClaims(draPod(), &cluster, {claimTemplate("eight-gpus", json::array({exactly("gpu", 8)}), "other")});
  ASSERT_FALSE(out.allowed);
  EXPECT_EQ(out.message,
            "podshaper: ResourceClaimTemplate \"eight-gpus\" (spec.resourceClaims[\"gpus\"]) was not found in "
            "namespace \"ml\": create it before the pod, so that podshaper can count the GPUs it asks");
  EXPECT_EQ(out.pod, draPod().json());  // nothing lost
}

TEST(PodClaims, ARequestPodshaperCannotCountIsDeniedByName) {
  ClusterView cluster = eightGpuNodes();
  json bad = {{"name", "gpu"}, {"exactly", {{"deviceClassName", "gpu.nvidia.com"}, {"count", -2}}}};
  auto out = shapeWithClaims(draPod(), &cluster, {claimTemplate("eight-gpus", json::array({bad}))});
  ASSERT_FALSE(out.allowed);
  EXPECT_EQ(out.message,
            "podshaper: ResourceClaimTemplate \"eight-gpus\" (spec.resourceClaims[\"gpus\"]): device request \"gpu\": "
            "count -2 is not a positive integer");
}

TEST(PodClaims, WithoutAClusterWatchTheClaimsAreNotReadAndThePodIsLeftWithAWarning) {
  AdmissionContext ctx;
  ctx.namespaceName = "ml";
  auto out = shapePod(draPod(), Config{}, ctx);
  ASSERT_TRUE(out.allowed) << out.message;
  EXPECT_EQ(out.pod, draPod().json());
  EXPECT_TRUE(hasWarning(out, "resource claims were not read (the webhook does not watch the cluster)"))
      << json(out.warnings);
}

TEST(PodClaims, ClaimsOfOtherDeviceClassesAreNotGpus) {
  ClusterView cluster = eightGpuNodes();
  auto out = shapeWithClaims(draPod("nics"), &cluster,
                             {claimTemplate("nics", json::array({exactly("nic", 4, "rdma.example.com")}))});
  ASSERT_TRUE(out.allowed) << out.message;
  EXPECT_EQ(out.pod, draPod("nics").json());
  EXPECT_TRUE(hasWarning(out, "no container requests nvidia.com/gpu or GPUs of device class gpu.nvidia.com through "
                              "resource claims: the pod is left as it is"))
      << json(out.warnings);
}

TEST(PodClaims, TheGpuDeviceClassIsConfigurable) {
  ClusterView cluster = eightGpuNodes();
  auto config = parseConfig("gpuDeviceClass: gpu.example.com\n");
  ASSERT_TRUE(config) << config.error().message;
  auto out = shapeWithClaims(draPod(), &cluster,
                             {claimTemplate("eight-gpus", json::array({exactly("gpu", 8, "gpu.example.com")}))}, *config);
  ASSERT_TRUE(out.allowed) << out.message;
  EXPECT_EQ(out.pod["metadata"]["annotations"]["podshaper.io/shm-size"], "7053Mi");
}

TEST(PodClaims, EachContainerGetsTheShareOfTheRequestItNames) {
  ClusterView cluster = eightGpuNodes();
  TrainingPod pod = draPod("two-halves");
  json second = pod.json()["spec"]["containers"][0];
  second["name"] = "trainer-b";
  second["resources"]["claims"] = json::array({{{"name", "gpus"}, {"request", "b"}}});
  pod.at("/spec/containers/0/resources/claims/0/request", "a").withContainer(second);
  auto out = shapeWithClaims(pod, &cluster,
                             {claimTemplate("two-halves", json::array({exactly("a", 4), exactly("b", 4)}))});
  ASSERT_TRUE(out.allowed) << out.message;
  // 7053Mi in all, half each (rounded up to MiB) on top of 100Gi.
  EXPECT_EQ(out.pod["spec"]["containers"][0]["resources"]["limits"]["memory"], "105927Mi");
  EXPECT_EQ(out.pod["spec"]["containers"][1]["resources"]["limits"]["memory"], "105927Mi");
  EXPECT_EQ(out.pod["spec"]["containers"][1]["env"][0]["value"], "4");
}

TEST(PodClaims, ARequestSharedByContainersIsCountedForTheFirst) {
  ClusterView cluster = eightGpuNodes();
  TrainingPod pod = draPod();
  json monitor = {{"name", "monitor"}, {"image", "dcgm"}, {"resources", {{"claims", json::array({{{"name", "gpus"}}})}}}};
  pod.withContainer(monitor);
  auto out = shapeWithClaims(pod, &cluster, {claimTemplate("eight-gpus", json::array({exactly("gpu", 8)}))});
  ASSERT_TRUE(out.allowed) << out.message;
  EXPECT_EQ(out.pod["metadata"]["annotations"]["podshaper.io/shm-size"], "7053Mi");  // 8 GPUs, not 16
  EXPECT_EQ(out.pod["spec"]["containers"][0]["env"][0]["value"], "8");
  EXPECT_EQ(out.pod["spec"]["containers"][1], monitor);  // no /dev/shm, memory, ranks or IPC_LOCK of its own
  EXPECT_TRUE(hasWarning(out, "container \"monitor\" uses the GPUs of request \"gpu\" of resource claim \"gpus\", "
                              "counted for an earlier container"))
      << json(out.warnings);
}

TEST(PodClaims, AContainerNamingAnotherSubrequestThanTheFirstGetsNone) {
  ClusterView cluster = eightGpuNodes();
  json request = {{"name", "gpu"},
                  {"firstAvailable", json::array({{{"name", "eight"}, {"deviceClassName", "gpu.nvidia.com"}, {"count", 8}},
                                                  {{"name", "four"}, {"deviceClassName", "gpu.nvidia.com"}, {"count", 4}}})}};
  TrainingPod first = draPod("flexible");
  first.at("/spec/containers/0/resources/claims/0/request", "gpu/eight");
  auto out = shapeWithClaims(first, &cluster, {claimTemplate("flexible", json::array({request}))});
  ASSERT_TRUE(out.allowed) << out.message;
  EXPECT_EQ(out.pod["metadata"]["annotations"]["podshaper.io/shm-size"], "7053Mi");
  TrainingPod second = draPod("flexible");
  second.at("/spec/containers/0/resources/claims/0/request", "gpu/four");
  out = shapeWithClaims(second, &cluster, {claimTemplate("flexible", json::array({request}))});
  ASSERT_TRUE(out.allowed) << out.message;
  EXPECT_EQ(out.pod, second.json());  // the scheduler allocates "eight": this container sees none
}

TEST(PodClaims, AClaimThatCouldNotBeReadIsDeniedWithWhy) {
  ClusterView cluster = eightGpuNodes();
  AdmissionContext ctx;
  ctx.namespaceName = "ml";
  ctx.cluster = &cluster;
  ctx.claims = [](std::string_view, const ClaimRef&) -> Result<std::optional<json>> {
    return makeError("GET /apis/resource.k8s.io/v1/namespaces/ml/resourceclaimtemplates/eight-gpus: 403 Forbidden");
  };
  auto out = shapePod(draPod(), Config{}, ctx);
  ASSERT_FALSE(out.allowed);
  EXPECT_EQ(out.message,
            "podshaper: ResourceClaimTemplate \"eight-gpus\" (spec.resourceClaims[\"gpus\"]) could not be read: GET "
            "/apis/resource.k8s.io/v1/namespaces/ml/resourceclaimtemplates/eight-gpus: 403 Forbidden");
}

TEST(PodClaims, APartialNodeIsDeniedWithTheClaimToChange) {
  ClusterView cluster = eightGpuNodes();
  auto out = shapeWithClaims(draPod("four"), &cluster, {claimTemplate("four", json::array({exactly("gpu", 4)}))});
  ASSERT_FALSE(out.allowed);
  EXPECT_EQ(out.message,
            "podshaper: the pod asks 4 GPUs but node-exclusive pods own whole 8-GPU nodes (from the cluster's "
            "validated nodes): request 8 GPUs in all (exactly.count in its resource claims) (one rank per GPU), or "
            "set podshaper.io/placement: shared to share the node");
  // One GPU is "1 GPU".
  auto one = shapeWithClaims(draPod("one"), &cluster, {claimTemplate("one", json::array({exactly("gpu", 1)}))});
  ASSERT_FALSE(one.allowed);
  EXPECT_NE(one.message.find("podshaper: the pod asks 1 GPU but node-exclusive pods"), std::string::npos) << one.message;
}

TEST(PodClaims, ExpandDoesNotRewriteAClaimItWarns) {
  ClusterView cluster = eightGpuNodes();
  auto config = parseConfig("partialNode: expand\n");
  ASSERT_TRUE(config);
  auto out = shapeWithClaims(draPod("four"), &cluster, {claimTemplate("four", json::array({exactly("gpu", 4)}))},
                             *config);
  ASSERT_TRUE(out.allowed) << out.message;
  EXPECT_TRUE(hasWarning(out, "config partialNode: expand does not raise a resource claim's count")) << json(out.warnings);
  EXPECT_FALSE(out.pod["spec"]["containers"][0]["resources"]["limits"].contains("nvidia.com/gpu"));
  EXPECT_EQ(out.pod["spec"]["containers"][0]["env"][0]["value"], "4");
}

TEST(PodClaims, AllBesideOtherGpusIsDenied) {
  ClusterView cluster = eightGpuNodes();
  auto out = shapeWithClaims(draPod("mixed"), &cluster,
                             {claimTemplate("mixed", json::array({allOf("node"), exactly("more", 2)}))});
  ASSERT_FALSE(out.allowed);
  EXPECT_EQ(out.message,
            "podshaper: container \"trainer\" asks every GPU of the node (a resource claim request of allocationMode "
            "All) beside other GPUs of the pod, which no node can give: ask All alone, or exact counts (exactly.count)");
}

TEST(PodClaims, AnEntryNamingNeitherTemplateNorClaimIsDenied) {
  ClusterView cluster = eightGpuNodes();
  TrainingPod pod = draPod();
  pod.at("/spec/resourceClaims/0", json{{"name", "gpus"}});
  auto out = shapeWithClaims(pod, &cluster, {});
  ASSERT_FALSE(out.allowed);
  EXPECT_EQ(out.message,
            "podshaper: spec.resourceClaims[\"gpus\"]: set exactly one of resourceClaimTemplateName and "
            "resourceClaimName");
}

TEST(PodClaims, NvidiaGpuLimitsAndClaimsAddUp) {
  ClusterView cluster = eightGpuNodes();
  TrainingPod pod = draPod("four");
  pod.at("/spec/containers/0/resources/limits/nvidia.com~1gpu", "4");
  auto out = shapeWithClaims(pod, &cluster, {claimTemplate("four", json::array({exactly("gpu", 4)}))});
  ASSERT_TRUE(out.allowed) << out.message;
  EXPECT_EQ(out.pod["metadata"]["annotations"]["podshaper.io/shm-size"], "7053Mi");
}

TEST(PodClaims, ContainerClaimGpusReadsRequestAndSubrequest) {
  PodClaimGpus claims;
  claims.byPodClaim["gpus"] = {GpuRequest{"a", false, 2, ""}, GpuRequest{"b", false, 6, "six"}};
  auto uses = [](json claimsOfContainer) { return json{{"resources", {{"claims", std::move(claimsOfContainer)}}}}; };
  std::set<std::string> taken;
  auto both = containerClaimGpus(uses(json::array({{{"name", "gpus"}}})), claims, taken);
  ASSERT_TRUE(both);
  EXPECT_EQ(both->count, 8u);
  EXPECT_EQ(taken, (std::set<std::string>{"gpus/a", "gpus/b"}));
  taken.clear();
  auto sub = containerClaimGpus(uses(json::array({{{"name", "gpus"}, {"request", "b/six"}}})), claims, taken);
  ASSERT_TRUE(sub);
  EXPECT_EQ(sub->count, 6u);
  auto again = containerClaimGpus(uses(json::array({{{"name", "gpus"}, {"request", "b"}}})), claims, taken);
  ASSERT_TRUE(again);
  EXPECT_FALSE(again->counted);
  EXPECT_EQ(again->shared, (std::vector<std::string>{"request \"b\" of resource claim \"gpus\""}));
  auto other = containerClaimGpus(uses(json::array({{{"name", "nics"}}})), claims, taken);
  ASSERT_TRUE(other);
  EXPECT_EQ(other->count, 0u);
}

}  // namespace
}  // namespace podshaper
