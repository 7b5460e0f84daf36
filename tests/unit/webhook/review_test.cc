#include "webhook/review.h"

#include <gtest/gtest.h>

#include "api/dra.h"

namespace podshaper::webhook {
namespace {

using nlohmann::json;

json profile(const std::string& ns, const std::string& name, const std::string& workload) {
  json p = {{"apiVersion", "podshaper.io/v1alpha1"},
            {"kind", "ShmProfile"},
            {"metadata", {{"name", name}}},
            {"spec", {{"workload", workload}}}};
  if (!ns.empty()) p["metadata"]["namespace"] = ns;
  return p;
}

TEST(ReviewClusterObjects, AShmProfileIsTheClustersNotAWorkload) {
  ClusterObjects cluster;
  EXPECT_TRUE(cluster.take(profile("ml", "job.train", "Job train")));
  EXPECT_FALSE(cluster.take(json{{"apiVersion", "batch/v1"}, {"kind", "Job"}, {"metadata", {{"name", "train"}}}}));
  ASSERT_EQ(cluster.shmProfiles.size(), 1u);
  EXPECT_EQ(cluster.shmProfiles[0]["metadata"]["name"], "job.train");
}

TEST(ReviewClusterObjects, AProfileIsFoundByItsNamespaceAndName) {
  auto lookup = shmProfileLookupOver({profile("ml", "job.train", "Job train"), profile("other", "job.train", "x")});
  auto found = lookup("ml", "job.train");
  ASSERT_TRUE(found);
  EXPECT_EQ((*found)["spec"]["workload"], "Job train");  // the whole object: shaping validates it
  EXPECT_FALSE(lookup("ml", "job.eval"));
  EXPECT_FALSE(lookup("team", "job.train"));
}

TEST(ReviewClusterObjects, TheLastOfOneNameWinsAndOneWithoutANameIsNeverFound) {
  // -f's input is taken after --cluster's: the file a user edits is the one that counts.
  auto lookup = shmProfileLookupOver({profile("ml", "job.train", "from --cluster"), profile("ml", "", "unnamed"),
                                      profile("ml", "job.train", "from -f")});
  ASSERT_TRUE(lookup("ml", "job.train"));
  EXPECT_EQ((*lookup("ml", "job.train"))["spec"]["workload"], "from -f");
  EXPECT_FALSE(lookup("ml", ""));
}

json computeDomain(const std::string& templateName) {
  json domain = {{"apiVersion", "resource.nvidia.com/v1beta1"},
                 {"kind", "ComputeDomain"},
                 {"metadata", {{"name", "domain"}, {"namespace", "ml"}}},
                 {"spec", {{"numNodes", 2}}}};
  if (!templateName.empty()) domain["spec"]["channel"]["resourceClaimTemplate"]["name"] = templateName;
  return domain;
}

// A ComputeDomain in review's input stands for the channel template its driver makes.
TEST(ReviewClusterObjects, AComputeDomainIsReadAsItsChannelTemplate) {
  ClusterObjects cluster;
  EXPECT_TRUE(cluster.take(computeDomain("imex-channel")));
  ASSERT_EQ(cluster.computeDomains.size(), 1u);
  Config config;
  config.mnnvl.computeDomainChannelClass = "channel.example.com";
  ClaimLookup lookup = cluster.claimLookup(config);
  auto found = lookup("ml", ClaimRef{"channel", ClaimKind::kTemplate, "imex-channel"});
  ASSERT_TRUE(found) << found.error().message;
  ASSERT_TRUE(*found);
  EXPECT_TRUE(requestsDeviceClass(**found, "channel.example.com"));
  EXPECT_FALSE(*lookup("other", ClaimRef{"channel", ClaimKind::kTemplate, "imex-channel"}));
  EXPECT_FALSE(*lookup("ml", ClaimRef{"channel", ClaimKind::kClaim, "imex-channel"}));  // a template, not a claim
}

TEST(ReviewClusterObjects, ATemplateGivenWinsAndAComputeDomainWithoutItsNameMakesNone) {
  ClusterObjects cluster;
  json given = {{"apiVersion", "resource.k8s.io/v1"},
                {"kind", "ResourceClaimTemplate"},
                {"metadata", {{"name", "imex-channel"}, {"namespace", "ml"}}},
                {"spec", {{"spec", {{"devices", {{"requests", json::array()}}}}}}}};
  EXPECT_TRUE(cluster.take(computeDomain("imex-channel")));
  EXPECT_TRUE(cluster.take(given));
  EXPECT_TRUE(cluster.take(computeDomain("")));
  auto found = cluster.claimLookup(Config())("ml", ClaimRef{"channel", ClaimKind::kTemplate, "imex-channel"});
  ASSERT_TRUE(found && *found);
  EXPECT_EQ(**found, given["spec"]["spec"]);
}

}  // namespace
}  // namespace podshaper::webhook
