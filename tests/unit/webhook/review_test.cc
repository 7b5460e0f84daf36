#include "webhook/review.h"

#include <gtest/gtest.h>

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

}  // namespace
}  // namespace podshaper::webhook
