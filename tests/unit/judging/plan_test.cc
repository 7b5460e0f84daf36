#include "judging/plan.h"

#include <gtest/gtest.h>

#include "tests/unit/judging/verdict_builder.h"

namespace podshaper {
namespace {

const std::vector<Policy> kPolicies = {defaultPolicy()};

Plan planFor(const json* report, const json* node, long long nodeMissingFor = 0, long long now = kNow) {
  return plan({.report = report, .node = node, .policies = &kPolicies, .now = now, .nodeMissingFor = nodeMissingFor});
}

TEST(Plan, FirstJudgementWritesStatusEventsAndLabels) {
  const json report = reportObject(TopologyBuilder(8).spec());
  const json node = nodeObject(8);
  Plan p = planFor(&report, &node);
  EXPECT_EQ(p.kind, Plan::Kind::Judged);
  ASSERT_TRUE(p.verdict);
  EXPECT_TRUE(p.verdict->validated);
  EXPECT_EQ(p.statusPatch["metadata"]["resourceVersion"], "10");
  EXPECT_EQ(p.statusPatch["status"]["conditions"][0]["status"], "True");
  ASSERT_EQ(p.events.size(), 1u);  // a Normal is told on the report only
  EXPECT_EQ(p.events[0].about.kind, "GPUTopologyReport");
  EXPECT_EQ(p.events[0].about.uid, "report-uid");
  EXPECT_EQ(p.events[0].event.reason, "TopologyValidated");
  // The labels and the condition in one write of the Node's status subresource.
  EXPECT_TRUE(p.nodePatch.is_null());
  EXPECT_EQ(p.nodeStatusPatch["metadata"]["resourceVersion"], "20");
  EXPECT_EQ(p.nodeStatusPatch["metadata"]["labels"]["podshaper.io/topology-validated"], "true");
  EXPECT_EQ(p.nodeStatusPatch["status"]["conditions"][0]["type"], "GPUTopologyValidated");
  ASSERT_TRUE(p.requeueAfter);  // when Fresh turns False
  EXPECT_EQ(*p.requeueAfter, 600 - 30 + 1);  // observed 30 s ago; stale past 600 s
}

TEST(Plan, SteadyStateWritesNothing) {
  const json first = reportObject(TopologyBuilder(8).spec());
  const json node = nodeObject(8);
  Plan p = planFor(&first, &node);
  const json judged = reportObject(TopologyBuilder(8).spec(), "11", p.statusPatch["status"]);
  json labelled = node;
  for (const auto& [k, v] : p.nodeStatusPatch["metadata"]["labels"].items()) labelled["metadata"]["labels"][k] = v;
  labelled["status"]["conditions"] = p.nodeStatusPatch["status"]["conditions"];
  Plan again = planFor(&judged, &labelled, 0, kNow + 60);
  EXPECT_TRUE(again.statusPatch.is_null());
  EXPECT_TRUE(again.events.empty());
  EXPECT_TRUE(again.nodePatch.is_null());
  EXPECT_TRUE(again.nodeStatusPatch.is_null());
}

TEST(Plan, WarningsAreToldOnTheNodeToo) {
  const json report = reportObject(TopologyBuilder(8).pair(2, 5, "NV18", "NS").spec());
  const json node = nodeObject(8);
  Plan p = planFor(&report, &node);
  ASSERT_EQ(p.events.size(), 4u);  // TopologyNotValidated and P2PUnavailable, each on the report and the Node
  EXPECT_EQ(p.events[0].about.kind, "GPUTopologyReport");
  EXPECT_EQ(p.events[1].about.kind, "Node");
  EXPECT_EQ(p.events[1].about.uid, "uid-0");
  EXPECT_EQ(p.events[1].event.reason, "TopologyNotValidated");
  EXPECT_EQ(p.events[3].event.reason, "P2PUnavailable");
  EXPECT_EQ(p.nodeStatusPatch["metadata"]["labels"]["podshaper.io/topology-validated"], "false");
}

TEST(Plan, ATaintThatChangesTakesTheLabelsToTheNodeItself) {
  // The status subresource keeps the spec: a taint is written to the Node, and the
  // labels with it, so that the two never disagree; the condition to its status.
  Policy tainting = defaultPolicy();
  tainting.requirements.taintEffect = "NoSchedule";
  const std::vector<Policy> policies = {tainting};
  const json report = reportObject(TopologyBuilder(8).pair(2, 5, "NV18", "NS").spec());
  const json node = nodeObject(8);
  Plan p = plan({.report = &report, .node = &node, .policies = &policies, .now = kNow});
  EXPECT_EQ(p.nodePatch["metadata"]["resourceVersion"], "20");
  EXPECT_EQ(p.nodePatch["metadata"]["labels"]["podshaper.io/topology-validated"], "false");
  EXPECT_EQ(p.nodePatch["spec"]["taints"][0]["key"], "podshaper.io/topology-not-validated");
  EXPECT_FALSE(p.nodeStatusPatch.contains("metadata"));
  EXPECT_EQ(p.nodeStatusPatch["status"]["conditions"][0]["status"], "False");
}

TEST(Plan, ReportGoneTakesThePodshaperLabelsOff) {
  json node = nodeObject(8, "20", {{"podshaper.io/topology-validated", "true"}, {"podshaper.io/p2p", "all"}});
  Plan p = planFor(nullptr, &node);
  EXPECT_EQ(p.kind, Plan::Kind::ReportGone);
  EXPECT_FALSE(p.verdict);
  const json& labels = p.nodeStatusPatch.at("metadata").at("labels");
  ASSERT_TRUE(labels.contains("podshaper.io/topology-validated"));
  EXPECT_TRUE(labels.at("podshaper.io/topology-validated").is_null());  // merge patch: remove
  EXPECT_FALSE(p.nodeStatusPatch.contains("status"));  // it had no condition to remove
  EXPECT_TRUE(planFor(nullptr, nullptr).nodePatch.is_null());
  EXPECT_TRUE(planFor(nullptr, nullptr).nodeStatusPatch.is_null());
}

TEST(Plan, AnOwnedReportWaitsForItsNodesGarbageCollection) {
  const json owned = reportObject(TopologyBuilder(8).spec());
  Plan waiting = planFor(&owned, nullptr, 20);
  EXPECT_EQ(waiting.kind, Plan::Kind::NodeGoing);
  EXPECT_TRUE(waiting.statusPatch.is_null());
  EXPECT_EQ(waiting.requeueAfter, kNodeGoneGraceSeconds - 20);

  Plan judged = planFor(&owned, nullptr, kNodeGoneGraceSeconds);
  EXPECT_EQ(judged.kind, Plan::Kind::Judged);
  EXPECT_FALSE(judged.verdict->validated);
  EXPECT_EQ(judged.verdict->condition("GPUCountMatchesNode")->status, "False");
  EXPECT_TRUE(judged.nodePatch.is_null());
  EXPECT_TRUE(judged.nodeStatusPatch.is_null());

  // A report no Node owns is judged at once.
  const json unowned = reportObject(TopologyBuilder(8).spec(), "10", nullptr, /*ownedByNode=*/false);
  EXPECT_TRUE(ownedByNode(owned));
  EXPECT_FALSE(ownedByNode(unowned));
  EXPECT_EQ(planFor(&unowned, nullptr).kind, Plan::Kind::Judged);
}

TEST(Plan, SpecKeptAsTextIsRead) {
  json report = reportObject(TopologyBuilder(8).spec());
  const json node = nodeObject(8);
  const Plan fromJson = planFor(&report, &node);
  report["spec"] = report["spec"].dump();
  const Plan fromText = planFor(&report, &node);
  EXPECT_EQ(fromText.statusPatch, fromJson.statusPatch);
  report["spec"] = "{not json";
  EXPECT_TRUE(reportSpecOf(report).is_null());
  EXPECT_FALSE(planFor(&report, &node).verdict->validated);
}

}  // namespace
}  // namespace podshaper
