// ClusterCache's claim lookup over the wire: a claim its watch has not seen is
// read with a GET; only a Status NotFound means "does not exist"; any other
// answer, or none in time, is an error the admission reports. The API server is the
// shared fake (tests/unit/support); the real one comes in tests/e2e.
#include "webhook/cluster_cache.h"

#include <gtest/gtest.h>

#include <chrono>
#include <thread>

#include "tests/unit/kube/black_hole.h"
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

}  // namespace
}  // namespace podshaper::webhook
