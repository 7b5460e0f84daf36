// KubeReconcileApi against the shared fake API server: each write goes to its path, as
// its patch type.
#include "operator/kube_reconcile_api.h"

#include <gtest/gtest.h>

#include "kube/client.h"
#include "tests/unit/kube/black_hole.h"
#include "tests/unit/operator/fake_reconcile_api.h"
#include "tests/unit/support/fake_api_server.h"

namespace podshaper::op {
namespace {

using nlohmann::json;

class KubeReconcileApiTest : public ::testing::Test {
 protected:
  fakes::FakeApiServer server;
  kube::Client client{kube::serverAt(server.url())};
  KubeReconcileApi api{client};

  fakes::Served last() const { return server.requests().back(); }
};

json withConditions(json object, const char* type) {
  object["status"]["conditions"] = json::array({{{"type", type}, {"status", "True"}}});
  return object;
}

TEST_F(KubeReconcileApiTest, AReportsStatusIsAMergePatchOfItsStatus) {
  server.put(reportPath("gpu-0"), withConditions(reportObject(TopologyBuilder(8).spec()), "Fresh"));
  ASSERT_TRUE(api.patchReportStatus("gpu-0", {{"status", {{"conditions", {{{"type", "Validated"}}}}}}}));
  EXPECT_EQ(last().method, "PATCH");
  EXPECT_EQ(last().path, reportPath("gpu-0") + "/status");
  const json conditions = server.object(reportPath("gpu-0")).value()["status"]["conditions"];
  ASSERT_EQ(conditions.size(), 1u);  // a merge patch replaces the list
  EXPECT_EQ(conditions[0]["type"], "Validated");
}

TEST_F(KubeReconcileApiTest, ANodeIsAMergePatchAndItsStatusAStrategicOne) {
  server.put(nodePath("gpu-0"), withConditions(nodeObject(8), "Ready"));
  ASSERT_TRUE(api.patchNode("gpu-0", {{"metadata", {{"labels", {{"podshaper.io/p2p", "all"}}}}}}));
  EXPECT_EQ(last().method, "PATCH");
  EXPECT_EQ(last().path, nodePath("gpu-0"));
  ASSERT_TRUE(api.patchNodeStatus("gpu-0", {{"status", {{"conditions", {{{"type", "GPUTopologyValidated"}}}}}}}));
  EXPECT_EQ(last().path, nodePath("gpu-0") + "/status");
  const json node = server.object(nodePath("gpu-0")).value();
  EXPECT_EQ(node["metadata"]["labels"]["podshaper.io/p2p"], "all");
  EXPECT_EQ(node["status"]["conditions"].size(), 2u);  // merged by type: the kubelet's Ready stays
}

TEST_F(KubeReconcileApiTest, APolicysStatusIsAMergePatchOfItsStatus) {
  server.put(policyPath("default"), withConditions({{"metadata", {{"name", "default"}}}, {"spec", json::object()}}, "Accepted"));
  ASSERT_TRUE(api.patchPolicyStatus("default", {{"status", {{"validatedNodes", 2}}}}));
  EXPECT_EQ(last().method, "PATCH");
  EXPECT_EQ(last().path, policyPath("default") + "/status");
  EXPECT_EQ(server.object(policyPath("default")).value()["status"]["validatedNodes"], 2);
}

TEST_F(KubeReconcileApiTest, AnEventIsCreatedInItsNamespaceAndALogReadWithItsBounds) {
  ASSERT_TRUE(api.createEvent("ml", {{"metadata", {{"name", "train-0.1"}, {"namespace", "ml"}}}, {"reason", "ShmExhausted"}}));
  EXPECT_EQ(last().method, "POST");
  EXPECT_EQ(last().path, eventsPath("ml"));
  server.putLog(podPath("ml", "train-0"), "trainer", "bus error\n", /*previous=*/true);
  auto log = api.readLog("ml", "train-0", "trainer", true);
  ASSERT_TRUE(log) << log.error().message;
  EXPECT_EQ(*log, "bus error\n");
  EXPECT_EQ(last().path, podPath("ml", "train-0") + "/log");
  EXPECT_EQ(last().params.at("container"), "trainer");
  EXPECT_EQ(last().params.at("previous"), "true");
  EXPECT_EQ(last().params.at("tailLines"), "500");
  EXPECT_FALSE(api.readLog("ml", "train-0", "trainer", false));  // none of the current run: 404
}

TEST_F(KubeReconcileApiTest, APodsShmUsageIsReadFromItsNamespace) {
  EXPECT_TRUE(api.getShmUsage("ml", "train-0").error().isNotFound());
  EXPECT_EQ(last().method, "GET");
  EXPECT_EQ(last().path, "/apis/podshaper.io/v1alpha1/namespaces/ml/shmusages/train-0");
  server.put(shmUsagePath("ml", "train-0"),
             {{"metadata", {{"name", "train-0"}, {"namespace", "ml"}}}, {"spec", {{"podUID", "pod-uid"}}}});
  auto usage = api.getShmUsage("ml", "train-0");
  ASSERT_TRUE(usage) << usage.error().message;
  EXPECT_EQ((*usage)["spec"]["podUID"], "pod-uid");
}

TEST_F(KubeReconcileApiTest, AShmProfileIsMadeItsStatusPutAndItDeletedOnItsVersion) {
  EXPECT_TRUE(api.getShmProfile("ml", "job.train").error().isNotFound());
  EXPECT_EQ(last().path, shmProfilePath("ml", "job.train"));
  auto made = api.createShmProfile("ml", {{"metadata", {{"name", "job.train"}, {"namespace", "ml"}}},
                                          {"spec", {{"workload", "Job train"}}}});
  ASSERT_TRUE(made) << made.error().message;
  EXPECT_EQ(last().method, "POST");
  EXPECT_EQ(last().path, shmProfilePath("ml"));
  json object = *made;
  object["status"] = {{"runCount", 1}};
  ASSERT_TRUE(api.putShmProfileStatus("ml", "job.train", object));
  EXPECT_EQ(last().method, "PUT");
  EXPECT_EQ(last().path, shmProfilePath("ml", "job.train") + "/status");
  EXPECT_EQ(last().body["metadata"]["resourceVersion"], (*made)["metadata"]["resourceVersion"]);
  EXPECT_EQ(server.object(shmProfilePath("ml", "job.train")).value()["status"]["runCount"], 1);
  ASSERT_TRUE(api.deleteShmProfile("ml", "job.train", "12"));
  EXPECT_EQ(last().method, "DELETE");
  EXPECT_EQ(last().path, shmProfilePath("ml", "job.train"));
  EXPECT_EQ(last().body, json::parse(R"({"preconditions": {"resourceVersion": "12"}})"));
}

}  // namespace
}  // namespace podshaper::op
