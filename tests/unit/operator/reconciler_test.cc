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
  FakeReconcileApi api;
  FakeClock clock;
  metrics::Registry registry;
  std::atomic<bool> leader{true};
  Reconciler reconciler{api, clock, registry, [this] { return leader.load(); },
                        {.identity = "operator-0", .eventNamespace = "default"}};
  std::vector<Policy> policies = {defaultPolicy()};

  // One reconcile of what the API server holds now, as a synced cache holds it.
  Reconciler::Result run() { return reconciler.reconcile("gpu-0", cached(report()), cached(node()), policies); }
  static std::optional<json> cached(const json& object) {
    return object.is_null() ? std::nullopt : std::optional<json>(object);
  }
  json report() const { return api.report(); }
  json node() const { return api.node(); }
  std::vector<std::string> writes() const { return api.writes(); }
  std::string metricsText() const { return registry.render(); }
};

const std::string kStatus = reportPath("gpu-0") + "/status";

TEST_F(ReconcilerTest, ANewReportIsJudgedAndItsNodeLabelled) {
  api.putReport(reportObject(TopologyBuilder(8).spec()));
  api.putNode(nodeObject(8));
  auto r = run();
  EXPECT_EQ(r.outcome, Reconciler::Outcome::Done);
  EXPECT_EQ(writes(), (std::vector<std::string>{"status gpu-0",
                                                "event Normal TopologyValidated on GPUTopologyReport in default",
                                                "node status gpu-0"}));  // its labels and condition at once
  EXPECT_EQ(report()["status"]["conditions"][0]["status"], "True");
  EXPECT_EQ(node()["metadata"]["labels"]["podshaper.io/topology-validated"], "true");
  // kubectl describe node: the verdict as a condition, which outlives the Events.
  const json condition = node()["status"]["conditions"][0];
  EXPECT_EQ(condition["type"], "GPUTopologyValidated");
  EXPECT_EQ(condition["status"], "True");
  EXPECT_EQ(condition["reason"], "RequirementsMet");
  EXPECT_EQ(condition["lastTransitionTime"], formatTime(clock.wall));
  EXPECT_EQ(node()["metadata"]["labels"]["kubernetes.io/hostname"], "gpu-0");
  EXPECT_EQ(api.events()[0]["reportingInstance"], "operator-0");
  EXPECT_EQ(api.events()[0]["involvedObject"]["uid"], "report-uid");
  ASSERT_TRUE(r.requeueAfter);  // judge again when the report would go stale
  EXPECT_EQ(r.requeueAfter->count(), 600 - 30 + 1);  // observed 30 s ago; stale past 600 s
  EXPECT_NE(metricsText().find("podshaper_operator_reports{verdict=\"validated\"} 1"), std::string::npos);
}

TEST_F(ReconcilerTest, NoWriteAtSteadyState) {
  api.putReport(reportObject(TopologyBuilder(8).spec()));
  api.putNode(nodeObject(8));
  run();
  api.clearWrites();
  clock.advance(60);
  // The agent's heartbeat: a new generation and observedAt, the same topology.
  json heartbeat = report();
  heartbeat["spec"] = TopologyBuilder(8).spec(clock.wall - 5);
  heartbeat["metadata"]["generation"] = 2;
  api.putReport(heartbeat);
  auto r = run();
  EXPECT_EQ(r.outcome, Reconciler::Outcome::Done);
  EXPECT_TRUE(writes().empty());
  EXPECT_NE(metricsText().find("podshaper_operator_writes_total{kind=\"status\"} 1"), std::string::npos);
}

TEST_F(ReconcilerTest, ACacheBehindOurOwnWriteIsNotJudgedAgain) {
  api.putReport(reportObject(TopologyBuilder(8).spec()));
  api.putNode(nodeObject(8));
  const json staleReport = report(), staleNode = node();
  run();
  api.clearWrites();
  // The watch has not brought our writes back yet: the cache still holds what they replaced.
  auto r = reconciler.reconcile("gpu-0", staleReport, staleNode, policies);
  EXPECT_EQ(r.outcome, Reconciler::Outcome::Done);
  EXPECT_FALSE(r.requeueAfter);
  EXPECT_TRUE(writes().empty());
  // Once it has, nothing is left to write.
  EXPECT_EQ(run().outcome, Reconciler::Outcome::Done);
  EXPECT_TRUE(writes().empty());
}

TEST_F(ReconcilerTest, EachVerdictTransitionIsWrittenAndToldOnce) {
  api.putReport(reportObject(TopologyBuilder(8).spec()));
  api.putNode(nodeObject(8));
  run();

  // Validated → not validated: P2P lost between GPU2 and GPU5.
  api.clearWrites();
  json lost = report();
  lost["spec"] = TopologyBuilder(8).pair(2, 5, "NV18", "NS").spec();
  api.putReport(lost);
  clock.advance(30);
  EXPECT_EQ(run().outcome, Reconciler::Outcome::Done);
  EXPECT_EQ(writes(), (std::vector<std::string>{
                            "status gpu-0",
                            "event Warning TopologyNotValidated on GPUTopologyReport in default",
                            "event Warning TopologyNotValidated on Node in default",
                            "event Warning P2PUnavailable on GPUTopologyReport in default",
                            "event Warning P2PUnavailable on Node in default",
                            "node status gpu-0",
                        }));
  EXPECT_EQ(node()["status"]["conditions"][0]["status"], "False");
  EXPECT_EQ(node()["status"]["conditions"][0]["reason"], "P2PUnavailable");
  EXPECT_EQ(node()["metadata"]["labels"]["podshaper.io/topology-validated"], "false");
  EXPECT_EQ(node()["metadata"]["labels"]["podshaper.io/p2p"], "partial");
  EXPECT_NE(metricsText().find("podshaper_operator_reports{verdict=\"not_validated\"} 1"), std::string::npos);
  EXPECT_NE(metricsText().find("podshaper_operator_reports{verdict=\"validated\"} 0"), std::string::npos);

  // The same again: told once.
  api.clearWrites();
  EXPECT_EQ(run().outcome, Reconciler::Outcome::Done);
  EXPECT_TRUE(writes().empty());

  // Fixed: back to validated, Normal Events on the report only.
  json fixed = report();
  fixed["spec"] = TopologyBuilder(8).spec(clock.wall - 10);
  api.putReport(fixed);
  EXPECT_EQ(run().outcome, Reconciler::Outcome::Done);
  EXPECT_EQ(writes(), (std::vector<std::string>{
                            "status gpu-0",
                            "event Normal TopologyValidated on GPUTopologyReport in default",
                            "event Normal AllPairsP2P on GPUTopologyReport in default",
                            "node status gpu-0",
                        }));
  EXPECT_EQ(node()["metadata"]["labels"]["podshaper.io/p2p"], "all");

  // The report goes stale when the agent stops: Fresh turns False once the time asked for has passed.
  api.clearWrites();
  auto again = run();
  ASSERT_TRUE(again.requeueAfter);
  clock.advance(again.requeueAfter->count());
  EXPECT_EQ(run().outcome, Reconciler::Outcome::Done);
  ASSERT_FALSE(writes().empty());
  EXPECT_EQ(report()["status"]["conditions"][0]["status"], "False");
  EXPECT_EQ(node()["metadata"]["labels"]["podshaper.io/topology-validated"], "false");
}

TEST_F(ReconcilerTest, AConflictIsRetriedWithoutTellingAnything) {
  api.putReport(reportObject(TopologyBuilder(8).spec()));
  api.putNode(nodeObject(8));
  api.fail("PATCH", kStatus, 409, "Conflict");
  auto r = run();
  EXPECT_EQ(r.outcome, Reconciler::Outcome::Retry);
  EXPECT_FALSE(r.requeueAfter);  // the queue's backoff decides
  EXPECT_TRUE(writes().empty());  // no Event, no Node write after a refused status
  EXPECT_NE(metricsText().find("podshaper_operator_conflicts_total 1"), std::string::npos);

  // The retry writes it all.
  EXPECT_EQ(run().outcome, Reconciler::Outcome::Done);
  EXPECT_EQ(writes().size(), 3u);

  // A conflict on the Node: retried too; the status is not written twice.
  api.clearWrites();
  json edited = node();
  edited["metadata"]["labels"]["podshaper.io/p2p"] = "none";  // someone else's edit
  api.putNode(edited);
  api.fail("PATCH", nodePath("gpu-0") + "/status", 409, "Conflict");
  EXPECT_EQ(run().outcome, Reconciler::Outcome::Retry);
  EXPECT_EQ(run().outcome, Reconciler::Outcome::Done);
  EXPECT_EQ(writes(), (std::vector<std::string>{"node status gpu-0"}));
  EXPECT_EQ(node()["metadata"]["labels"]["podshaper.io/p2p"], "all");
  EXPECT_NE(metricsText().find("podshaper_operator_conflicts_total 2"), std::string::npos);
}

TEST_F(ReconcilerTest, AnObjectDeletedWhileWritingIsDone) {
  api.putReport(reportObject(TopologyBuilder(8).spec()));
  api.putNode(nodeObject(8));
  api.fail("PATCH", kStatus, 404, "NotFound");
  auto r = run();
  EXPECT_EQ(r.outcome, Reconciler::Outcome::Done);  // its DELETED event queues the name again
  EXPECT_FALSE(r.requeueAfter);
  EXPECT_TRUE(writes().empty());
}

TEST_F(ReconcilerTest, AFailedEventDoesNotFailTheReconcile) {
  api.putReport(reportObject(TopologyBuilder(8).spec()));
  api.putNode(nodeObject(8));
  api.fail("POST", eventsPath("default"), 403, "Forbidden");
  EXPECT_EQ(run().outcome, Reconciler::Outcome::Done);
  EXPECT_EQ(writes(), (std::vector<std::string>{"status gpu-0", "node status gpu-0"}));
}

TEST_F(ReconcilerTest, ADeletedNodesReportWaitsForTheGarbageCollector) {
  api.putReport(reportObject(TopologyBuilder(8).spec()));
  api.putNode(nodeObject(8));
  run();
  api.clearWrites();
  api.remove(nodePath("gpu-0"));  // kubectl delete node gpu-0

  auto waiting = run();
  EXPECT_EQ(waiting.outcome, Reconciler::Outcome::Done);
  EXPECT_EQ(waiting.requeueAfter, std::chrono::seconds(kNodeGoneGraceSeconds));
  EXPECT_TRUE(writes().empty());
  clock.advance(45);
  EXPECT_EQ(run().requeueAfter, std::chrono::seconds(kNodeGoneGraceSeconds - 45));
  EXPECT_TRUE(writes().empty());

  // The collector did not come: the report is flagged, and nothing is written to a Node.
  clock.advance(15);
  EXPECT_EQ(run().outcome, Reconciler::Outcome::Done);
  ASSERT_FALSE(writes().empty());
  EXPECT_EQ(writes().front(), "status gpu-0");
  for (const auto& w : writes()) EXPECT_EQ(w.find("node "), std::string::npos) << w;
  EXPECT_EQ(report()["status"]["conditions"][3]["reason"], "NodeNotFound");

  // The collector came: the report is gone, and so is its verdict.
  api.clearWrites();
  api.remove(reportPath("gpu-0"));
  EXPECT_EQ(run().outcome, Reconciler::Outcome::Done);
  EXPECT_TRUE(writes().empty());
  EXPECT_NE(metricsText().find("podshaper_operator_reports{verdict=\"not_validated\"} 0"), std::string::npos);
}

TEST_F(ReconcilerTest, TheGraceStartsAgainWhenTheNodeComesBack) {
  api.putReport(reportObject(TopologyBuilder(8).spec()));
  api.putNode(nodeObject(8));
  run();
  const json registered = node();
  api.remove(nodePath("gpu-0"));
  EXPECT_EQ(run().requeueAfter, std::chrono::seconds(kNodeGoneGraceSeconds));
  clock.advance(50);
  api.putNode(registered);  // a Node of that name again (re-registered)
  EXPECT_EQ(run().outcome, Reconciler::Outcome::Done);
  api.remove(nodePath("gpu-0"));
  clock.advance(30);
  EXPECT_EQ(run().requeueAfter, std::chrono::seconds(kNodeGoneGraceSeconds));  // not 60 - 80
}

TEST_F(ReconcilerTest, AReportNoNodeOwnsIsJudgedAtOnceWithoutItsNode) {
  api.putReport(reportObject(TopologyBuilder(8).spec(), "10", nullptr, /*ownedByNode=*/false));
  auto r = run();
  EXPECT_EQ(r.outcome, Reconciler::Outcome::Done);
  EXPECT_EQ(writes().front(), "status gpu-0");
  EXPECT_EQ(report()["status"]["conditions"][3]["reason"], "NodeNotFound");
}

TEST_F(ReconcilerTest, WithoutNodesStatusTheLabelsStillGoToTheNode) {
  // RBAC of a chart from before (patch on nodes, none on nodes/status): the labels through
  // the Node itself, the condition retried until it is granted.
  api.putReport(reportObject(TopologyBuilder(8).spec()));
  api.putNode(nodeObject(8));
  api.fail("PATCH", nodePath("gpu-0") + "/status", 403, "Forbidden", 2);
  EXPECT_EQ(run().outcome, Reconciler::Outcome::Retry);
  EXPECT_EQ(writes().back(), "node gpu-0");
  EXPECT_EQ(node()["metadata"]["labels"]["podshaper.io/topology-validated"], "true");
  EXPECT_FALSE(node().contains("status") && node()["status"].contains("conditions"));
  api.clearWrites();
  EXPECT_EQ(run().outcome, Reconciler::Outcome::Retry);  // the condition alone, refused again
  EXPECT_TRUE(writes().empty());
  // Granted: the condition goes in; the labels are there already.
  EXPECT_EQ(run().outcome, Reconciler::Outcome::Done);
  EXPECT_EQ(writes(), (std::vector<std::string>{"node status gpu-0"}));
  EXPECT_EQ(node()["status"]["conditions"][0]["status"], "True");
}

TEST_F(ReconcilerTest, ANodeConditionThatFailedIsWrittenAloneOnTheRetry) {
  // A taint is the spec's: the Node itself takes it with the labels, its status the condition.
  policies[0].requirements.taintEffect = "NoSchedule";
  api.putReport(reportObject(TopologyBuilder(8).pair(2, 5, "NV18", "NS").spec()));
  api.putNode(nodeObject(8));
  const json unlabelled = node();
  api.fail("PATCH", nodePath("gpu-0") + "/status", 500, "InternalError");
  EXPECT_EQ(run().outcome, Reconciler::Outcome::Retry);
  EXPECT_EQ(writes().back(), "node gpu-0");  // the labels and taint went in; the condition did not
  EXPECT_EQ(node()["spec"]["taints"][0]["value"], "P2PUnavailable");
  api.clearWrites();
  // The cache still holds the Node the label write replaced: not judged again from it.
  EXPECT_EQ(reconciler.reconcile("gpu-0", report(), unlabelled, policies).outcome, Reconciler::Outcome::Done);
  EXPECT_TRUE(writes().empty());
  // The label write's Node arrives: only the condition is written.
  EXPECT_EQ(run().outcome, Reconciler::Outcome::Done);
  EXPECT_EQ(writes(), (std::vector<std::string>{"node status gpu-0"}));
  EXPECT_EQ(node()["status"]["conditions"][0]["status"], "False");
  EXPECT_EQ(node()["metadata"]["labels"]["podshaper.io/topology-validated"], "false");

  // Healed: the taint goes, with the labels; the condition turns.
  api.clearWrites();
  json fixed = report();
  fixed["spec"] = TopologyBuilder(8).spec();
  api.putReport(fixed);
  EXPECT_EQ(run().outcome, Reconciler::Outcome::Done);
  EXPECT_EQ(writes().size(), 5u);  // status, two Normal Events, the Node, its status
  EXPECT_EQ(writes()[3], "node gpu-0");
  EXPECT_EQ(writes()[4], "node status gpu-0");
  EXPECT_TRUE(node()["spec"]["taints"].empty());
  EXPECT_EQ(node()["metadata"]["labels"]["podshaper.io/topology-validated"], "true");
  EXPECT_EQ(node()["status"]["conditions"][0]["status"], "True");
}

TEST_F(ReconcilerTest, ADeletedReportTakesItsLabelsOffTheNode) {
  api.putReport(reportObject(TopologyBuilder(8).spec()));
  api.putNode(nodeObject(8));
  run();
  api.clearWrites();
  api.remove(reportPath("gpu-0"));
  EXPECT_EQ(run().outcome, Reconciler::Outcome::Done);
  EXPECT_EQ(writes(), (std::vector<std::string>{"node status gpu-0"}));
  EXPECT_FALSE(node()["metadata"]["labels"].contains("podshaper.io/topology-validated"));
  EXPECT_TRUE(node()["status"]["conditions"].empty());
  EXPECT_EQ(node()["metadata"]["labels"]["kubernetes.io/hostname"], "gpu-0");
  EXPECT_NE(metricsText().find("podshaper_operator_reports{verdict=\"validated\"} 0"), std::string::npos);
}

TEST_F(ReconcilerTest, AStandbyWritesNothing) {
  api.putReport(reportObject(TopologyBuilder(8).spec()));
  api.putNode(nodeObject(8));
  leader = false;
  EXPECT_EQ(run().outcome, Reconciler::Outcome::NotLeader);
  EXPECT_TRUE(writes().empty());
}

TEST_F(ReconcilerTest, LeadershipLostWhileJudgingWritesNothing) {
  api.putReport(reportObject(TopologyBuilder(8).spec()));
  api.putNode(nodeObject(8));
  int asked = 0;
  Reconciler losing{api, clock, registry, [&asked] { return ++asked == 1; },
                    {.identity = "operator-0", .eventNamespace = "default"}};
  auto r = losing.reconcile("gpu-0", report(), node(), policies);
  EXPECT_EQ(r.outcome, Reconciler::Outcome::NotLeader);
  EXPECT_EQ(asked, 2);  // asked again right before the status write
  EXPECT_TRUE(writes().empty());
}

TEST_F(ReconcilerTest, LeadershipLostMidReconcileStopsTheWrites) {
  api.putReport(reportObject(TopologyBuilder(8).pair(0, 1, "NV18", "NS").spec()));
  api.putNode(nodeObject(8));
  api.onCall([this](const FakeReconcileApi::Call& s) {
    if (s.method == "PATCH" && s.path == kStatus) leader = false;
  });
  EXPECT_EQ(run().outcome, Reconciler::Outcome::NotLeader);
  // The status write was in flight; the Events follow the write that records them;
  // the Node is the next leader's to write.
  ASSERT_FALSE(writes().empty());
  EXPECT_EQ(writes().front(), "status gpu-0");
  for (const auto& w : writes()) EXPECT_EQ(w.find("node "), std::string::npos) << w;

  // On losing the lease the verdict gauges go.
  reconciler.forgetVerdicts();
  EXPECT_NE(metricsText().find("podshaper_operator_reports{verdict=\"not_validated\"} 0"), std::string::npos);
}

TEST_F(ReconcilerTest, ANewLeaderJudgesWhatItFinds) {
  // A report the old leader judged and a Node it labelled: the new one writes nothing.
  api.putReport(reportObject(TopologyBuilder(8).spec()));
  api.putNode(nodeObject(8));
  run();
  Reconciler successor{api, clock, registry, [] { return true; },
                       {.identity = "operator-1", .eventNamespace = "default"}};
  api.clearWrites();
  auto r = successor.reconcile("gpu-0", report(), node(), policies);
  EXPECT_EQ(r.outcome, Reconciler::Outcome::Done);
  EXPECT_TRUE(writes().empty());
}

}  // namespace
}  // namespace podshaper::op
