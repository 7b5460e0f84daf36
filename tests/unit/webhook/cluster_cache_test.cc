// ClusterCache's claim lookup over the wire: a claim its watch has not seen is
// read with a GET; only a Status NotFound means "does not exist"; any other
// answer, or none in time, is an error the admission reports. The API server is
// a small fake of the two GET paths; the real one comes in tests/e2e.
#include "webhook/cluster_cache.h"

// cpprest's U() macro would break gtest (its templates have a parameter named U).
#define _TURN_OFF_PLATFORM_STRING
#include <cpprest/http_listener.h>
#include <gtest/gtest.h>

#include <chrono>
#include <thread>

#include "tests/unit/kube/black_hole.h"

namespace podshaper::webhook {
namespace {

using namespace std::chrono_literals;
using nlohmann::json;
using web::http::http_request;
using web::http::status_codes;
using web::http::experimental::listener::http_listener;

constexpr const char* kTemplates = "/apis/resource.k8s.io/v1/namespaces/ml/resourceclaimtemplates/";

json notFound() {
  return {{"kind", "Status"}, {"apiVersion", "v1"}, {"status", "Failure"}, {"code", 404}, {"reason", "NotFound"},
          {"message", "resourceclaimtemplates.resource.k8s.io \"missing\" not found"}};
}

// Answers GETs of ResourceClaimTemplates in namespace ml: eight-gpus exists, missing
// does not, forbidden is refused, slow answers after 3 s; any other path is a 404 with
// no Status, as an API server that does not serve resource.k8s.io/v1 gives.
class FakeResourceApi {
 public:
  FakeResourceApi() : listener_(url()) {
    listener_.support([](http_request request) {
      const std::string path = request.relative_uri().path();
      if (path == std::string(kTemplates) + "eight-gpus") {
        json object = {{"apiVersion", "resource.k8s.io/v1"},
                       {"kind", "ResourceClaimTemplate"},
                       {"metadata", {{"name", "eight-gpus"}, {"namespace", "ml"}}},
                       {"spec",
                        {{"spec",
                          {{"devices",
                            {{"requests", json::array({{{"name", "gpu"},
                                                        {"exactly", {{"deviceClassName", "gpu.nvidia.com"},
                                                                     {"count", 8}}}}})}}}}}}}};
        request.reply(status_codes::OK, object.dump(), "application/json");
      } else if (path == std::string(kTemplates) + "missing") {
        request.reply(status_codes::NotFound, notFound().dump(), "application/json");
      } else if (path == std::string(kTemplates) + "forbidden") {
        json status = {{"kind", "Status"}, {"code", 403}, {"reason", "Forbidden"},
                       {"message", "resourceclaimtemplates.resource.k8s.io \"forbidden\" is forbidden"}};
        request.reply(status_codes::Forbidden, status.dump(), "application/json");
      } else if (path == std::string(kTemplates) + "slow") {
        std::this_thread::sleep_for(3s);
        request.reply(status_codes::NotFound, notFound().dump(), "application/json");
      } else {
        request.reply(status_codes::NotFound, "404 page not found\n", "text/plain");
      }
    });
    listener_.open().wait();
  }
  ~FakeResourceApi() { listener_.close().wait(); }
  std::string url() const { return "http://127.0.0.1:" + std::to_string(port_); }

 private:
  int port_ = freePort();
  http_listener listener_;

  static int freePort() {
    kube::BlackHole probe;  // a free loopback port, closed again when it goes
    std::string u = probe.url();
    return std::stoi(u.substr(u.rfind(':') + 1));
  }
};

ClaimRef templateRef(const std::string& name) { return ClaimRef{"gpus", ClaimKind::kTemplate, name}; }

TEST(ClusterCacheClaims, AClaimTheWatchHasNotSeenIsReadWithAGet) {
  FakeResourceApi api;
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
  FakeResourceApi api;
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
  FakeResourceApi api;
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
