// The operator's controller against the shared fake API server: its informers list and
// watch there, its workers reconcile what the caches hold, and the queue does what the
// reconcile answers (forget, retry with backoff, look again later).
#include "operator/controller.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <ctime>
#include <functional>
#include <memory>
#include <thread>

#include "tests/unit/operator/served_reconcile_api.h"
#include "tests/unit/support/eventually.h"

namespace podshaper::op {
namespace {

using nlohmann::json;
using support::eventually;

const std::string kPolicy = kube::resourcePath(names::kGroupVersion, names::kPolicyResource, "", "default");

json policyObject() {
  return {{"apiVersion", "podshaper.io/v1alpha1"},
          {"kind", "TopologyPolicy"},
          {"metadata", {{"name", "default"}}},
          {"spec",
           {{"nodeSelector", json::object()},
            {"requirements",
             {{"requireP2PAllPairs", true}, {"requireMemlockUnlimited", true}, {"maxReportAge", "10m"}}}}}};
}

long long now() { return static_cast<long long>(std::time(nullptr)); }

class ControllerTest : public ::testing::Test {
 protected:
  ServedReconcileApi served;
  metrics::Registry registry;
  std::atomic<bool> leader{true};
  std::unique_ptr<Controller> controller;

  void SetUp() override { served.server.put(kPolicy, policyObject()); }
  void TearDown() override {
    if (controller) controller->stop();
  }
  void start() {
    controller = std::make_unique<Controller>(served.client, OperatorConfig{}, registry,
                                              [this] { return leader.load(); }, "operator-0");
    controller->start();
    ASSERT_TRUE(eventually([this] { return controller->synced(); }));
  }
  std::string label(std::string_view key) const {
    const json node = served.node();
    return node.is_null() ? "" : node["metadata"]["labels"].value(std::string(key), "");
  }
  int countOf(const std::string& write) const {
    int n = 0;
    for (const auto& w : served.writes()) n += w == write;
    return n;
  }
  std::string metricsText() const { return registry.render(); }
};

TEST_F(ControllerTest, AReportIsJudgedItsNodeLabelledAndThePolicyToldThenNothingIsWritten) {
  served.putNode(nodeObject(8));
  served.putReport(reportObject(TopologyBuilder(8).spec(now() - 5)));
  start();
  ASSERT_TRUE(eventually([this] { return label(names::kTopologyValidated) == "true"; })) << served.node().dump();
  EXPECT_EQ(label(names::kP2P), "all");
  EXPECT_EQ(served.report()["status"]["conditions"][0]["status"], "True");
  ASSERT_TRUE(eventually([this] {
    const auto policy = served.server.object(kPolicy);
    return policy && (*policy)["status"].value("validatedNodes", 0) == 1;
  }));
  // Steady: the watches bring the operator's own writes back, and nothing more is written.
  std::this_thread::sleep_for(std::chrono::milliseconds(500));
  served.clearWrites();
  std::this_thread::sleep_for(std::chrono::seconds(3));
  EXPECT_EQ(served.writes().size(), 0u);
  EXPECT_EQ(countOf("status gpu-0"), 0);
}

TEST_F(ControllerTest, AChangedReportComesThroughTheWatchAndIsToldOnce) {
  served.putNode(nodeObject(8));
  served.putReport(reportObject(TopologyBuilder(8).spec(now() - 5)));
  start();
  ASSERT_TRUE(eventually([this] { return label(names::kTopologyValidated) == "true"; }));
  served.clearWrites();
  json lost = served.report();
  lost["spec"] = TopologyBuilder(8).pair(2, 5, "NV18", "NS").spec(now() - 1);
  served.putReport(lost);
  ASSERT_TRUE(eventually([this] { return label(names::kP2P) == "partial"; })) << served.node().dump();
  EXPECT_EQ(label(names::kTopologyValidated), "false");
  ASSERT_TRUE(eventually([this] { return countOf("event Warning P2PUnavailable on Node in default") == 1; }));
  std::this_thread::sleep_for(std::chrono::seconds(1));
  EXPECT_EQ(countOf("event Warning P2PUnavailable on Node in default"), 1);
  EXPECT_EQ(countOf("status gpu-0"), 1);
}

TEST_F(ControllerTest, AConflictIsRetriedByTheQueue) {
  served.putNode(nodeObject(8));
  served.putReport(reportObject(TopologyBuilder(8).spec(now() - 5)));
  served.server.fail("PATCH", nodePath("gpu-0") + "/status", 409, "Conflict", 2);
  start();
  ASSERT_TRUE(eventually([this] { return label(names::kTopologyValidated) == "true"; }));
  int refused = 0;
  for (const fakes::Served& s : served.server.requests()) refused += s.code == 409;
  EXPECT_EQ(refused, 2);
  EXPECT_NE(metricsText().find("podshaper_operator_reconciles_total{result=\"error\"} 2"), std::string::npos)
      << metricsText();
  EXPECT_EQ(countOf("status gpu-0"), 1);  // the status went in the first time: not written again
}

TEST_F(ControllerTest, AReportIsJudgedAgainWhenItGoesStale) {
  served.putNode(nodeObject(8));
  // Observed 592 s ago: fresh for 8 s more (maxReportAge 10m), then the queue brings it back.
  served.putReport(reportObject(TopologyBuilder(8).spec(now() - 592)));
  start();
  ASSERT_TRUE(eventually([this] { return label(names::kTopologyValidated) == "true"; }));
  ASSERT_TRUE(eventually([this] { return label(names::kTopologyValidated) == "false"; }, std::chrono::seconds(20)))
      << served.report().dump();
  const json report = served.report();
  bool staleSaid = false;
  for (const json& c : report["status"]["conditions"]) staleSaid |= c["reason"] == "ReportStale";
  EXPECT_TRUE(staleSaid) << report["status"].dump();
}

TEST_F(ControllerTest, AnExpiredWatchListsAgainAndMissesNothing) {
  served.putNode(nodeObject(8));
  served.putReport(reportObject(TopologyBuilder(8).spec(now() - 5)));
  start();
  ASSERT_TRUE(eventually([this] { return label(names::kTopologyValidated) == "true"; }));
  served.server.compact();  // every open watch: 410, then a list
  json lost = served.report();
  lost["spec"] = TopologyBuilder(8).pair(0, 1, "NV18", "NS").spec(now() - 1);
  served.putReport(lost);
  ASSERT_TRUE(eventually([this] { return label(names::kP2P) == "partial"; }));
  int reportLists = 0;
  const std::string reports = kube::resourcePath(names::kGroupVersion, names::kReportResource);
  for (const fakes::Served& s : served.server.requests()) {
    reportLists += s.method == "GET" && s.path == reports && s.query.find("watch") == std::string::npos;
  }
  EXPECT_GE(reportLists, 2);
}

TEST_F(ControllerTest, AStandbyWritesNothingUntilItLeads) {
  leader = false;
  served.putNode(nodeObject(8));
  served.putReport(reportObject(TopologyBuilder(8).spec(now() - 5)));
  start();
  std::this_thread::sleep_for(std::chrono::seconds(2));
  EXPECT_TRUE(served.writes().empty());
  EXPECT_NE(metricsText().find("podshaper_operator_reconciles_total{result=\"not_leader\"}"), std::string::npos);
  leader = true;
  controller->enqueueAll();  // what the operator does on taking the lease
  ASSERT_TRUE(eventually([this] { return label(names::kTopologyValidated) == "true"; }));
}

TEST_F(ControllerTest, AShapedPodThatRanOutOfShmIsToldOnItsOwnQueue) {
  auto pod = [](const std::string& name, bool shaped) {
    json cs = {{"name", "trainer"}, {"restartCount", 1}};
    cs["lastState"]["terminated"] = {
        {"exitCode", 1},
        {"message",
         "misc/shmutils.cc:132 NCCL WARN Error while creating shared memory segment /dev/shm/nccl-4PshbB (size "
         "34210176), error: No space left on device (28)"}};
    json labels = json::object();
    if (shaped) labels[std::string(names::kShapedLabel)] = "true";
    return json{{"metadata",
                 {{"name", name},
                  {"namespace", "ml"},
                  {"labels", labels},
                  {"annotations", {{std::string(names::kShmSize), "161Mi"}}}}},
                {"spec", {{"nodeName", "gpu-0"}}},
                {"status", {{"phase", "Running"}, {"containerStatuses", {cs}}}}};
  };
  served.server.put(podPath("ml", "train-0"), pod("train-0", true));
  served.server.put(podPath("ml", "other-0"), pod("other-0", false));  // not the webhook's: not watched
  start();
  ASSERT_TRUE(eventually([this] { return countOf("event Warning ShmExhausted on Pod in ml") == 1; }));
  std::this_thread::sleep_for(std::chrono::seconds(1));
  ASSERT_EQ(served.events().size(), 1u);
  EXPECT_EQ(served.events()[0]["involvedObject"]["name"], "train-0");
}

TEST_F(ControllerTest, TheShmExhaustedEventNamesAVolumeOfThePodsOwn) {
  // The informer keeps a shaped pod compacted: its container's /dev/shm mount and that
  // volume stay, so that the Event says which /dev/shm ran out.
  json cs = {{"name", "trainer"}, {"restartCount", 0}};
  cs["state"]["terminated"] = {{"exitCode", 1},
                               {"message", "NCCL WARN Error while creating shared memory segment /dev/shm/nccl-4PshbB "
                                           "(size 34210176), error: No space left on device (28)"}};
  json pod = {{"metadata",
               {{"name", "train-0"},
                {"namespace", "ml"},
                {"labels", {{std::string(names::kShapedLabel), "true"}}},
                {"annotations", {{std::string(names::kShmFormula), "... = 2223Mi needed"}}}}},
              {"spec",
               {{"nodeName", "gpu-0"},
                {"containers",
                 {{{"name", "trainer"},
                   {"image", "pytorch"},
                   {"volumeMounts", {{{"name", "data"}, {"mountPath", "/data"}}, {{"name", "dshm"}, {"mountPath", "/dev/shm"}}}}}}},
                {"volumes",
                 {{{"name", "data"}, {"persistentVolumeClaim", {{"claimName", "data"}}}},
                  {{"name", "dshm"}, {"emptyDir", {{"medium", "Memory"}, {"sizeLimit", "1Gi"}}}}}}}},
              {"status", {{"phase", "Failed"}, {"containerStatuses", {cs}}}}};
  served.server.put(podPath("ml", "train-0"), pod);
  start();
  ASSERT_TRUE(eventually([this] { return countOf("event Warning ShmExhausted on Pod in ml") == 1; }));
  const std::string message = served.events()[0]["message"];
  EXPECT_NE(message.find("/dev/shm is the pod's own emptyDir \"dshm\" (medium Memory, sizeLimit 1Gi), not podshaper's"),
            std::string::npos)
      << message;
}

}  // namespace
}  // namespace podshaper::op
