// ClusterCache's claim lookup over the wire: a claim its watch has not seen is
// read with a GET; only a Status NotFound means "does not exist"; any other
// answer, or none in time, is an error the admission reports. Its watches: what it
// keeps of Namespaces and Nodes (what admission reads), claims cached, counted, and
// a kubelet's heartbeat that changes nothing kept. The API server is the shared fake
// (tests/unit/support); the real one comes in tests/e2e.
#include "webhook/cluster_cache.h"

#include <gtest/gtest.h>

#include <chrono>
#include <functional>
#include <thread>

#include "metrics/metrics.h"
#include "shaping/pod_shaper.h"

#include "tests/unit/kube/black_hole.h"
#include "tests/unit/support/eventually.h"
#include "tests/unit/support/fake_api_server.h"

namespace podshaper::webhook {
namespace {

using namespace std::chrono_literals;
using nlohmann::json;

constexpr const char* kTemplates = "/apis/resource.k8s.io/v1/namespaces/ml/resourceclaimtemplates/";

// The API server of the cache's GETs: in namespace ml, ResourceClaimTemplate eight-gpus
// exists, missing does not, forbidden is refused, slow answers after 3 s; resource.k8s.io/v1
// is served for namespace ml only, so any other path is a 404 with no Status, as an API
// server that does not serve the group gives.
struct ResourceApi {
  fakes::FakeApiServer server;
  ResourceApi() {
    server.servesOnly({"/apis/resource.k8s.io/v1/namespaces/ml/"});
    server.put(std::string(kTemplates) + "eight-gpus",
               {{"apiVersion", "resource.k8s.io/v1"},
                {"kind", "ResourceClaimTemplate"},
                {"metadata", {{"name", "eight-gpus"}, {"namespace", "ml"}}},
                {"spec",
                 {{"spec",
                   {{"devices",
                     {{"requests", json::array({{{"name", "gpu"},
                                                 {"exactly", {{"deviceClassName", "gpu.nvidia.com"},
                                                              {"count", 8}}}}})}}}}}}}});
    server.fail("GET", std::string(kTemplates) + "forbidden", 403, "Forbidden", 1000,
                "resourceclaimtemplates.resource.k8s.io \"forbidden\" is forbidden");
    server.delay(std::string(kTemplates) + "slow", 3s);
  }
  std::string url() const { return server.url(); }
};

ClaimRef templateRef(const std::string& name) { return ClaimRef{"gpus", ClaimKind::kTemplate, name}; }

TEST(ClusterCacheClaims, AClaimTheWatchHasNotSeenIsReadWithAGet) {
  ResourceApi api;
  kube::Client client(kube::serverAt(api.url()));
  ClusterCache cache(client);  // not started: every lookup misses the watch
  auto found = cache.claims()("ml", templateRef("eight-gpus"));
  ASSERT_TRUE(found) << found.error().message;
  ASSERT_TRUE(found->has_value());
  auto gpus = gpuRequests(**found, "gpu.nvidia.com");
  ASSERT_TRUE(gpus);
  ASSERT_EQ(gpus->size(), 1u);
  EXPECT_EQ((*gpus)[0].count, 8u);
}

TEST(ClusterCacheClaims, OnlyAStatusNotFoundMeansItDoesNotExist) {
  ResourceApi api;
  kube::Client client(kube::serverAt(api.url()));
  ClusterCache cache(client);
  auto missing = cache.claims()("ml", templateRef("missing"));
  ASSERT_TRUE(missing) << missing.error().message;
  EXPECT_FALSE(missing->has_value());

  auto forbidden = cache.claims()("ml", templateRef("forbidden"));
  ASSERT_FALSE(forbidden);
  EXPECT_NE(forbidden.error().message.find("is forbidden"), std::string::npos) << forbidden.error().message;

  // A 404 that is no Status: the API server does not serve resource.k8s.io/v1.
  auto notServed = cache.claims()("other", templateRef("eight-gpus"));
  ASSERT_FALSE(notServed);
  EXPECT_NE(notServed.error().message.find("GET /apis/resource.k8s.io/v1/namespaces/other/"), std::string::npos)
      << notServed.error().message;
}

TEST(ClusterCacheClaims, OneAdmissionSpendsAtMostItsBudgetOnGets) {
  ResourceApi api;
  kube::Client client(kube::serverAt(api.url()));
  ClusterCache cache(client);
  ClaimLookup lookup = cache.claims();  // one admission
  const auto start = std::chrono::steady_clock::now();
  for (int i = 0; i < 4; ++i) {
    auto slow = lookup("ml", templateRef("slow"));
    ASSERT_FALSE(slow);
  }
  auto last = lookup("ml", templateRef("eight-gpus"));
  ASSERT_FALSE(last);
  EXPECT_NE(last.error().message.find("its time to read claims from the API server is spent"), std::string::npos)
      << last.error().message;
  // Each slow GET gives up after 1 s; no new one starts after 2 s. (A bound, not a timing:
  // the point is that 4 slow claims do not take 4 × 3 s.)
  EXPECT_LT(std::chrono::steady_clock::now() - start, 5s);
}

TEST(ClusterCacheWatches, KeepWhatAdmissionReadsAndCountIt) {
  fakes::FakeApiServer api;
  json labels = {{"podshaper.io/topology-validated", "true"}, {"podshaper.io/gpu-count", "8"}};
  for (int i = 0; i < 40; ++i) labels["feature.node.kubernetes.io/cpu-cpuid.F" + std::to_string(i)] = "true";
  auto node = [&](const std::string& heartbeat) {
    return json{{"metadata", {{"name", "gpu-1"}, {"uid", "u1"}, {"labels", labels}}},
                {"status",
                 {{"allocatable", {{"nvidia.com/gpu", "8"}, {"cpu", "192"}}},
                  {"capacity", {{"memory", "2Ti"}, {"cpu", "192"}}},
                  {"conditions", {{{"type", "Ready"}, {"lastHeartbeatTime", heartbeat}}}},
                  {"images", {{{"names", {"pytorch:2"}}, {"sizeBytes", 1}}}}}}};
  };
  api.put("/api/v1/nodes/gpu-1", node("t0"));
  api.put("/api/v1/nodes/cpu-1", {{"metadata", {{"name", "cpu-1"}}}});
  api.put("/api/v1/namespaces/ml", {{"metadata",
                                     {{"name", "ml"},
                                      {"labels",
                                       {{"pod-security.kubernetes.io/enforce", "baseline"},
                                        {"podshaper.io/inject", "disabled"},
                                        {"team", "llm"}}}}}});
  api.put("/apis/resource.k8s.io/v1/namespaces/ml/resourceclaims/c1",
          {{"metadata", {{"name", "c1"}, {"namespace", "ml"}}},
           {"spec", {{"devices", {{"requests", {{{"name", "gpu"}, {"exactly", {{"deviceClassName", "gpu.nvidia.com"},
                                                                                  {"count", 8}}}}}}}}}},
           {"status", {{"allocation", {{"devices", {{"results", json::array()}}}}}}}});
  kube::Client client(kube::serverAt(api.url()));
  metrics::Registry registry;
  ClusterCache cache(client, &registry);
  cache.start();
  ASSERT_TRUE(support::eventually([&] { return cache.synced(); }));
  const auto view = cache.view();
  ASSERT_EQ(view->nodes.size(), 1u);  // the CPU node left out
  const Node& n = view->nodes[0];
  EXPECT_EQ(n.name, "gpu-1");
  EXPECT_EQ(n.uid, "u1");
  EXPECT_EQ(n.labels.toMap(), (Labels{{"podshaper.io/gpu-count", "8"}, {"podshaper.io/topology-validated", "true"}}));
  EXPECT_EQ(n.gpus(), 8u);
  EXPECT_EQ(n.memoryBytes, int64_t{2} << 40);
  EXPECT_EQ(view->namespaceLabels.at("ml"),
            (Labels{{"pod-security.kubernetes.io/enforce", "baseline"}, {"podshaper.io/inject", "disabled"}}));

  // The claim comes from the watch: no GET of it.
  ASSERT_TRUE(support::eventually([&] { return registry.render().find("resource=\"resourceclaims\"} 1") != std::string::npos; }))
      << registry.render();
  auto claim = cache.claims()("ml", ClaimRef{"gpus", ClaimKind::kClaim, "c1"});
  ASSERT_TRUE(claim && claim->has_value());
  auto gpus = gpuRequests(**claim, "gpu.nvidia.com");
  ASSERT_TRUE(gpus);
  EXPECT_EQ((*gpus)[0].count, 8u);
  for (const fakes::Served& s : api.requests()) {
    EXPECT_FALSE(s.method == "GET" && s.path.ends_with("/resourceclaims/c1")) << "a GET of a watched claim";
  }
  // Each gauge is set just after its informer says it synced: the view can be built first.
  ASSERT_TRUE(support::eventually([&] {
    const std::string m = registry.render();
    return m.find("resource=\"nodes\"} 2") != std::string::npos &&
           m.find("resource=\"namespaces\"} 1") != std::string::npos;
  })) << registry.render();
  const std::string metrics = registry.render();
  EXPECT_NE(metrics.find("podshaper_webhook_cached_objects{resource=\"nodes\"} 2"), std::string::npos) << metrics;
  EXPECT_NE(metrics.find("podshaper_webhook_cached_objects{resource=\"namespaces\"} 1"), std::string::npos);
  EXPECT_NE(metrics.find("podshaper_webhook_cached_objects{resource=\"resourceclaimtemplates\"} 0"), std::string::npos);

  // A heartbeat changes nothing admission reads: the view is not built again. First the
  // view settles: an informer that synced after the first build may rebuild it once
  // (the same content; CI saw it about once in 20 runs).
  auto settled = cache.view();
  for (int i = 0; i < 10; ++i) {
    std::this_thread::sleep_for(600ms);  // three rebuild periods
    if (cache.view() == settled) break;
    settled = cache.view();
  }
  EXPECT_EQ(settled->nodes.size(), 1u);
  api.put("/api/v1/nodes/gpu-1", node("t1"));
  std::this_thread::sleep_for(600ms);
  EXPECT_EQ(cache.view(), settled);
  labels["podshaper.io/gpu-count"] = "4";
  api.put("/api/v1/nodes/gpu-1", node("t2"));
  EXPECT_TRUE(support::eventually([&] { return *cache.view()->nodes[0].label("podshaper.io/gpu-count") == "4"; }));
  // Only the Nodes that changed are read again: one more comes, one goes, the other stays.
  api.put("/api/v1/nodes/gpu-2", {{"metadata", {{"name", "gpu-2"}}}, {"status", {{"allocatable", {{"nvidia.com/gpu", "4"}}}}}});
  ASSERT_TRUE(support::eventually([&] { return cache.view()->nodes.size() == 2; }));
  EXPECT_EQ(cache.view()->kinds.size(), 2u);
  ASSERT_TRUE(api.remove("/api/v1/nodes/gpu-1"));
  ASSERT_TRUE(support::eventually([&] { return cache.view()->nodes.size() == 1; }));
  EXPECT_EQ(cache.view()->nodes[0].name, "gpu-2");
  EXPECT_EQ(cache.view()->kinds.size(), 1u);
  cache.stop();
}

}  // namespace
}  // namespace podshaper::webhook

namespace podshaper::webhook {
namespace {

// What the Namespace and Node caches keep is all admission reads: a pod shaped against the
// objects as the API server sends them and as the caches keep them comes out the same.
TEST(ClusterCacheKeeps, WhatAdmissionReads) {
  json node = {{"metadata",
                {{"name", "gpu-1"},
                 {"uid", "u1"},
                 {"resourceVersion", "9"},
                 {"labels",
                  {{"podshaper.io/topology-validated", "true"}, {"podshaper.io/gpu-count", "8"},
                   {"podshaper.io/p2p", "all"}, {"podshaper.io/memlock", "unlimited"},
                   {"kubernetes.io/hostname", "gpu-1"}, {"nvidia.com/gpu.product", "H100"}}},
                 {"managedFields", {{{"manager", "kubelet"}}}}}},
               {"spec", {{"podCIDR", "10.0.0.0/24"}}},
               {"status",
                {{"allocatable", {{"nvidia.com/gpu", "8"}, {"memory", "1Ti"}, {"cpu", "96"}}},
                 {"capacity", {{"nvidia.com/gpu", "8"}, {"memory", "1Ti"}}},
                 {"conditions", {{{"type", "Ready"}, {"status", "True"}}}},
                 {"images", {{{"names", {"pytorch"}}, {"sizeBytes", 9000000000}}}}}}};
  json ns = {{"metadata",
              {{"name", "ml"},
               {"labels", {{"pod-security.kubernetes.io/enforce", "baseline"}, {"team", "a"}}},
               {"annotations", {{"owner", "x"}}}}}};
  json keptNode = node, keptNs = ns;
  keepNode(keptNode);
  keepNamespace(keptNs);
  EXPECT_FALSE(keptNode.contains("spec"));
  json pod = json::parse(R"({"apiVersion":"v1","kind":"Pod","metadata":{"name":"t","namespace":"ml",
    "labels":{"podshaper.io/inject":"true"},"annotations":{"podshaper.io/dataloader-workers":"2",
    "podshaper.io/batch-bytes":"64Mi"}},"spec":{"containers":[{"name":"c","image":"i",
    "resources":{"limits":{"nvidia.com/gpu":"8","memory":"64Gi"}}}]}})");
  Config config;
  config.node.memlock = MemlockLimit{4194304};
  for (const char* podSecurity : {"baseline", "privileged"}) {
    ns["metadata"]["labels"]["pod-security.kubernetes.io/enforce"] = podSecurity;
    keptNs["metadata"]["labels"]["pod-security.kubernetes.io/enforce"] = podSecurity;
    const ClusterView whole = buildClusterView({ns}, {node}), kept = buildClusterView({keptNs}, {keptNode});
    AdmissionContext a, b;
    a.namespaceName = b.namespaceName = "ml";
    a.cluster = &whole;
    b.cluster = &kept;
    const ShapeOutcome x = shapePod(pod, config, a), y = shapePod(pod, config, b);
    EXPECT_EQ(x.allowed, y.allowed) << podSecurity;
    EXPECT_EQ(x.message, y.message);
    EXPECT_EQ(x.pod, y.pod) << podSecurity;
    EXPECT_EQ(x.warnings, y.warnings);
  }
}

}  // namespace
}  // namespace podshaper::webhook
