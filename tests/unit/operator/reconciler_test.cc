#include "operator/reconciler.h"

#include <gtest/gtest.h>

#include <atomic>
#include <deque>

#include "tests/unit/judging/verdict_builder.h"
#include "tests/unit/operator/fake_reconcile_api.h"

namespace podshaper::op {
namespace {

class ReconcilerTest : public ::testing::Test {
 protected:
  FakeApi api;
  FakeClock clock;
  metrics::Registry registry;
  std::atomic<bool> leader{true};
  Reconciler reconciler{api, clock, registry, [this] { return leader.load(); },
                        {.identity = "operator-0", .eventNamespace = "default"}};
  std::vector<Policy> policies = {defaultPolicy()};

  // One reconcile of what the API server holds now, as a synced cache holds it.
  Reconciler::Result run() {
    std::optional<json> report, node;
    if (!api.report.is_null()) report = api.report;
    if (!api.node.is_null()) node = api.node;
    return reconciler.reconcile("gpu-0", report, node, policies);
  }
  std::string metricsText() const { return registry.render(); }
};

kube::ApiError conflict() {
  return kube::makeApiError(409, "Conflict", "PATCH gputopologyreports/gpu-0/status: 409 Conflict: the object has been modified");
}

TEST_F(ReconcilerTest, ANewReportIsJudgedAndItsNodeLabelled) {
  api.report = reportObject(TopologyBuilder(8).spec());
  api.node = nodeObject(8);
  auto r = run();
  EXPECT_EQ(r.outcome, Reconciler::Outcome::Done);
  EXPECT_EQ(api.writes, (std::vector<std::string>{"status gpu-0", "event Normal TopologyValidated on GPUTopologyReport in default",
                                                  "node gpu-0", "node status gpu-0"}));
  EXPECT_EQ(api.report["status"]["conditions"][0]["status"], "True");
  EXPECT_EQ(api.node["metadata"]["labels"]["podshaper.io/topology-validated"], "true");
  // kubectl describe node: the verdict as a condition, which outlives the Events.
  const json& condition = api.node["status"]["conditions"][0];
  EXPECT_EQ(condition["type"], "GPUTopologyValidated");
  EXPECT_EQ(condition["status"], "True");
  EXPECT_EQ(condition["reason"], "RequirementsMet");
  EXPECT_EQ(condition["lastTransitionTime"], formatTime(clock.wall));
  EXPECT_EQ(api.node["metadata"]["labels"]["kubernetes.io/hostname"], "gpu-0");
  EXPECT_EQ(api.events[0]["reportingInstance"], "operator-0");
  EXPECT_EQ(api.events[0]["involvedObject"]["uid"], "report-uid");
  ASSERT_TRUE(r.requeueAfter);  // judge again when the report would go stale
  EXPECT_EQ(r.requeueAfter->count(), 600 - 30 + 1);  // observed 30 s ago; stale past 600 s
  EXPECT_NE(metricsText().find("podshaper_operator_reports{verdict=\"validated\"} 1"), std::string::npos);
}

TEST_F(ReconcilerTest, NoWriteAtSteadyState) {
  api.report = reportObject(TopologyBuilder(8).spec());
  api.node = nodeObject(8);
  run();
  api.writes.clear();
  clock.advance(60);
  // The agent's heartbeat: a new generation and observedAt, the same topology.
  api.report["spec"] = TopologyBuilder(8).spec(clock.wall - 5);
  api.report["metadata"]["generation"] = 2;
  api.report["metadata"]["resourceVersion"] = "500";
  auto r = run();
  EXPECT_EQ(r.outcome, Reconciler::Outcome::Done);
  EXPECT_TRUE(api.writes.empty());
  EXPECT_NE(metricsText().find("podshaper_operator_writes_total{kind=\"status\"} 1"), std::string::npos);
}

TEST_F(ReconcilerTest, ACacheBehindOurOwnWriteIsNotJudgedAgain) {
  api.report = reportObject(TopologyBuilder(8).spec());
  api.node = nodeObject(8);
  const json staleReport = api.report, staleNode = api.node;
  run();
  api.writes.clear();
  // The watch has not brought our writes back yet: the cache still holds what they replaced.
  auto r = reconciler.reconcile("gpu-0", staleReport, staleNode, policies);
  EXPECT_EQ(r.outcome, Reconciler::Outcome::Done);
  EXPECT_FALSE(r.requeueAfter);
  EXPECT_TRUE(api.writes.empty());
  // Once it has, nothing is left to write.
  EXPECT_EQ(run().outcome, Reconciler::Outcome::Done);
  EXPECT_TRUE(api.writes.empty());
}

TEST_F(ReconcilerTest, EachVerdictTransitionIsWrittenAndToldOnce) {
  api.report = reportObject(TopologyBuilder(8).spec());
  api.node = nodeObject(8);
  run();

  // Validated → not validated: P2P lost between GPU2 and GPU5.
  api.writes.clear();
  api.report["spec"] = TopologyBuilder(8).pair(2, 5, "NV18", "NS").spec();
  api.report["metadata"]["resourceVersion"] = "600";
  clock.advance(30);
  EXPECT_EQ(run().outcome, Reconciler::Outcome::Done);
  EXPECT_EQ(api.writes, (std::vector<std::string>{
                            "status gpu-0",
                            "event Warning TopologyNotValidated on GPUTopologyReport in default",
                            "event Warning TopologyNotValidated on Node in default",
                            "event Warning P2PUnavailable on GPUTopologyReport in default",
                            "event Warning P2PUnavailable on Node in default",
                            "node gpu-0",
                            "node status gpu-0",
                        }));
  EXPECT_EQ(api.node["status"]["conditions"][0]["status"], "False");
  EXPECT_EQ(api.node["status"]["conditions"][0]["reason"], "P2PUnavailable");
  EXPECT_EQ(api.node["metadata"]["labels"]["podshaper.io/topology-validated"], "false");
  EXPECT_EQ(api.node["metadata"]["labels"]["podshaper.io/p2p"], "partial");
  EXPECT_NE(metricsText().find("podshaper_operator_reports{verdict=\"not_validated\"} 1"), std::string::npos);
  EXPECT_NE(metricsText().find("podshaper_operator_reports{verdict=\"validated\"} 0"), std::string::npos);

  // The same again: told once.
  api.writes.clear();
  EXPECT_EQ(run().outcome, Reconciler::Outcome::Done);
  EXPECT_TRUE(api.writes.empty());

  // Fixed: back to validated, Normal Events on the report only.
  api.report["spec"] = TopologyBuilder(8).spec(clock.wall - 10);
  api.report["metadata"]["resourceVersion"] = "700";
  EXPECT_EQ(run().outcome, Reconciler::Outcome::Done);
  EXPECT_EQ(api.writes, (std::vector<std::string>{
                            "status gpu-0",
                            "event Normal TopologyValidated on GPUTopologyReport in default",
                            "event Normal AllPairsP2P on GPUTopologyReport in default",
                            "node gpu-0",
                            "node status gpu-0",
                        }));
  EXPECT_EQ(api.node["metadata"]["labels"]["podshaper.io/p2p"], "all");

  // The report goes stale when the agent stops: Fresh turns False once the time asked for has passed.
  api.writes.clear();
  auto again = run();
  ASSERT_TRUE(again.requeueAfter);
  clock.advance(again.requeueAfter->count());
  EXPECT_EQ(run().outcome, Reconciler::Outcome::Done);
  ASSERT_FALSE(api.writes.empty());
  EXPECT_EQ(api.report["status"]["conditions"][0]["status"], "False");
  EXPECT_EQ(api.node["metadata"]["labels"]["podshaper.io/topology-validated"], "false");
}

TEST_F(ReconcilerTest, AConflictIsRetriedWithoutTellingAnything) {
  api.report = reportObject(TopologyBuilder(8).spec());
  api.node = nodeObject(8);
  api.statusErrors.push_back(conflict());
  auto r = run();
  EXPECT_EQ(r.outcome, Reconciler::Outcome::Retry);
  EXPECT_FALSE(r.requeueAfter);  // the queue's backoff decides
  EXPECT_TRUE(api.writes.empty());  // no Event, no Node write after a refused status
  EXPECT_NE(metricsText().find("podshaper_operator_conflicts_total 1"), std::string::npos);

  // The retry writes it all.
  EXPECT_EQ(run().outcome, Reconciler::Outcome::Done);
  EXPECT_EQ(api.writes.size(), 4u);

  // A conflict on the Node: retried too; the status is not written twice.
  api.writes.clear();
  api.node["metadata"]["labels"]["podshaper.io/p2p"] = "none";  // someone else's edit
  api.node["metadata"]["resourceVersion"] = "800";
  api.nodeErrors.push_back(conflict());
  EXPECT_EQ(run().outcome, Reconciler::Outcome::Retry);
  EXPECT_EQ(run().outcome, Reconciler::Outcome::Done);
  EXPECT_EQ(api.writes, (std::vector<std::string>{"node gpu-0"}));
  EXPECT_EQ(api.node["metadata"]["labels"]["podshaper.io/p2p"], "all");
  EXPECT_NE(metricsText().find("podshaper_operator_conflicts_total 2"), std::string::npos);
}

TEST_F(ReconcilerTest, AnObjectDeletedWhileWritingIsDone) {
  api.report = reportObject(TopologyBuilder(8).spec());
  api.node = nodeObject(8);
  api.statusErrors.push_back(kube::makeApiError(404, "NotFound", "gputopologyreports \"gpu-0\" not found"));
  auto r = run();
  EXPECT_EQ(r.outcome, Reconciler::Outcome::Done);  // its DELETED event queues the name again
  EXPECT_FALSE(r.requeueAfter);
  EXPECT_TRUE(api.writes.empty());
}

TEST_F(ReconcilerTest, AFailedEventDoesNotFailTheReconcile) {
  api.report = reportObject(TopologyBuilder(8).spec());
  api.node = nodeObject(8);
  api.eventErrors.push_back(kube::makeApiError(403, "Forbidden", "events is forbidden"));
  EXPECT_EQ(run().outcome, Reconciler::Outcome::Done);
  EXPECT_EQ(api.writes, (std::vector<std::string>{"status gpu-0", "node gpu-0", "node status gpu-0"}));
}

TEST_F(ReconcilerTest, ADeletedNodesReportWaitsForTheGarbageCollector) {
  api.report = reportObject(TopologyBuilder(8).spec());
  api.node = nodeObject(8);
  run();
  api.writes.clear();
  api.node = nullptr;  // kubectl delete node gpu-0

  auto waiting = run();
  EXPECT_EQ(waiting.outcome, Reconciler::Outcome::Done);
  EXPECT_EQ(waiting.requeueAfter, std::chrono::seconds(kNodeGoneGraceSeconds));
  EXPECT_TRUE(api.writes.empty());
  clock.advance(45);
  EXPECT_EQ(run().requeueAfter, std::chrono::seconds(kNodeGoneGraceSeconds - 45));
  EXPECT_TRUE(api.writes.empty());

  // The collector did not come: the report is flagged, and nothing is written to a Node.
  clock.advance(15);
  EXPECT_EQ(run().outcome, Reconciler::Outcome::Done);
  ASSERT_FALSE(api.writes.empty());
  EXPECT_EQ(api.writes.front(), "status gpu-0");
  for (const auto& w : api.writes) EXPECT_EQ(w.find("node "), std::string::npos) << w;
  EXPECT_EQ(api.report["status"]["conditions"][3]["reason"], "NodeNotFound");

  // The collector came: the report is gone, and so is its verdict.
  api.writes.clear();
  api.report = nullptr;
  EXPECT_EQ(run().outcome, Reconciler::Outcome::Done);
  EXPECT_TRUE(api.writes.empty());
  EXPECT_NE(metricsText().find("podshaper_operator_reports{verdict=\"not_validated\"} 0"), std::string::npos);
}

TEST_F(ReconcilerTest, TheGraceStartsAgainWhenTheNodeComesBack) {
  api.report = reportObject(TopologyBuilder(8).spec());
  api.node = nodeObject(8);
  run();
  const json node = api.node;
  api.node = nullptr;
  EXPECT_EQ(run().requeueAfter, std::chrono::seconds(kNodeGoneGraceSeconds));
  clock.advance(50);
  api.node = node;  // a Node of that name again (re-registered)
  api.node["metadata"]["resourceVersion"] = "900";
  EXPECT_EQ(run().outcome, Reconciler::Outcome::Done);
  api.node = nullptr;
  clock.advance(30);
  EXPECT_EQ(run().requeueAfter, std::chrono::seconds(kNodeGoneGraceSeconds));  // not 60 - 80
}

TEST_F(ReconcilerTest, AReportNoNodeOwnsIsJudgedAtOnceWithoutItsNode) {
  api.report = reportObject(TopologyBuilder(8).spec(), "10", nullptr, /*ownedByNode=*/false);
  auto r = run();
  EXPECT_EQ(r.outcome, Reconciler::Outcome::Done);
  EXPECT_EQ(api.writes.front(), "status gpu-0");
  EXPECT_EQ(api.report["status"]["conditions"][3]["reason"], "NodeNotFound");
}

TEST_F(ReconcilerTest, ANodeConditionThatFailedIsWrittenAloneOnTheRetry) {
  api.report = reportObject(TopologyBuilder(8).spec());
  api.node = nodeObject(8);
  const json unlabelled = api.node;
  api.nodeStatusErrors.push_back(kube::makeApiError(500, "InternalError", "etcd is slow"));
  EXPECT_EQ(run().outcome, Reconciler::Outcome::Retry);
  EXPECT_EQ(api.writes.back(), "node gpu-0");  // the labels went in; the condition did not
  api.writes.clear();
  // The cache still holds the Node the label write replaced: not judged again from it.
  const json labelled = api.node;
  api.node = unlabelled;
  EXPECT_EQ(run().outcome, Reconciler::Outcome::Done);
  EXPECT_TRUE(api.writes.empty());
  // The label write's Node arrives: only the condition is written.
  api.node = labelled;
  EXPECT_EQ(run().outcome, Reconciler::Outcome::Done);
  EXPECT_EQ(api.writes, (std::vector<std::string>{"node status gpu-0"}));
  EXPECT_EQ(api.node["status"]["conditions"][0]["status"], "True");
}

TEST_F(ReconcilerTest, ADeletedReportTakesItsLabelsOffTheNode) {
  api.report = reportObject(TopologyBuilder(8).spec());
  api.node = nodeObject(8);
  run();
  api.writes.clear();
  api.report = nullptr;
  EXPECT_EQ(run().outcome, Reconciler::Outcome::Done);
  EXPECT_EQ(api.writes, (std::vector<std::string>{"node gpu-0", "node status gpu-0"}));
  EXPECT_FALSE(api.node["metadata"]["labels"].contains("podshaper.io/topology-validated"));
  EXPECT_TRUE(api.node["status"]["conditions"].empty());
  EXPECT_EQ(api.node["metadata"]["labels"]["kubernetes.io/hostname"], "gpu-0");
  EXPECT_NE(metricsText().find("podshaper_operator_reports{verdict=\"validated\"} 0"), std::string::npos);
}

TEST_F(ReconcilerTest, AStandbyWritesNothing) {
  api.report = reportObject(TopologyBuilder(8).spec());
  api.node = nodeObject(8);
  leader = false;
  EXPECT_EQ(run().outcome, Reconciler::Outcome::NotLeader);
  EXPECT_TRUE(api.writes.empty());
}

TEST_F(ReconcilerTest, LeadershipLostWhileJudgingWritesNothing) {
  api.report = reportObject(TopologyBuilder(8).spec());
  api.node = nodeObject(8);
  int asked = 0;
  Reconciler losing{api, clock, registry, [&asked] { return ++asked == 1; },
                    {.identity = "operator-0", .eventNamespace = "default"}};
  auto r = losing.reconcile("gpu-0", api.report, api.node, policies);
  EXPECT_EQ(r.outcome, Reconciler::Outcome::NotLeader);
  EXPECT_EQ(asked, 2);  // asked again right before the status write
  EXPECT_TRUE(api.writes.empty());
}

TEST_F(ReconcilerTest, LeadershipLostMidReconcileStopsTheWrites) {
  api.report = reportObject(TopologyBuilder(8).pair(0, 1, "NV18", "NS").spec());
  api.node = nodeObject(8);
  api.afterStatusWrite = [this] { leader = false; };
  EXPECT_EQ(run().outcome, Reconciler::Outcome::NotLeader);
  // The status write was in flight; the Events follow the write that records them;
  // the Node is the next leader's to write.
  ASSERT_FALSE(api.writes.empty());
  EXPECT_EQ(api.writes.front(), "status gpu-0");
  for (const auto& w : api.writes) EXPECT_EQ(w.find("node "), std::string::npos) << w;

  // On losing the lease the verdict gauges go.
  reconciler.forgetVerdicts();
  EXPECT_NE(metricsText().find("podshaper_operator_reports{verdict=\"not_validated\"} 0"), std::string::npos);
}

TEST_F(ReconcilerTest, ANewLeaderJudgesWhatItFinds) {
  // A report the old leader judged and a Node it labelled: the new one writes nothing.
  api.report = reportObject(TopologyBuilder(8).spec());
  api.node = nodeObject(8);
  run();
  Reconciler successor{api, clock, registry, [] { return true; }, {.identity = "operator-1", .eventNamespace = "default"}};
  api.writes.clear();
  auto r = successor.reconcile("gpu-0", api.report, api.node, policies);
  EXPECT_EQ(r.outcome, Reconciler::Outcome::Done);
  EXPECT_TRUE(api.writes.empty());
}

}  // namespace
}  // namespace podshaper::op
