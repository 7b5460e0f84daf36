#include "judging/report_status.h"

#include <gtest/gtest.h>

#include "tests/unit/judging/verdict_builder.h"

namespace podshaper {
namespace {

// ---- status, events, node patch

TEST(ReportStatus, TransitionTimeKeptWhileTheStatusHolds) {
  Node node = gpuNode(8);
  Verdict v = judge(TopologyBuilder(8).spec(), &node, {defaultPolicy()}, kNow);
  json first = reportStatus(v, nullptr, 1, kNow);
  EXPECT_EQ(first["gpus"], 8);
  EXPECT_EQ(first["interconnect"], "nvlink");
  EXPECT_EQ(first["conditions"][0]["type"], "Validated");
  EXPECT_EQ(first["conditions"][0]["lastTransitionTime"], "2026-11-22T00:00:00Z");
  EXPECT_EQ(first["conditions"][0]["observedGeneration"], 1);

  // A heartbeat: a new generation, the same verdict: no write.
  json again = reportStatus(judge(TopologyBuilder(8).spec(kNow + 60), &node, {defaultPolicy()}, kNow + 90), first, 2,
                            kNow + 90);
  EXPECT_EQ(again["conditions"][0]["lastTransitionTime"], "2026-11-22T00:00:00Z");
  EXPECT_FALSE(statusChanged(first, again));

  // P2P lost: that condition moves on, the others keep their time.
  Verdict broken = judge(TopologyBuilder(8).pair(0, 1, "NV18", "NS").spec(), &node, {defaultPolicy()}, kNow + 120);
  json next = reportStatus(broken, first, 3, kNow + 120);
  EXPECT_TRUE(statusChanged(first, next));
  EXPECT_EQ(next["conditions"][0]["lastTransitionTime"], "2026-11-22T00:02:00Z");
  EXPECT_EQ(next["conditions"][2]["lastTransitionTime"], "2026-11-22T00:00:00Z");
  EXPECT_EQ(next["p2p"], "partial");
}

TEST(ReportStatus, EventsOnTransitionsOnly) {
  Node node = gpuNode(8);
  Verdict good = judge(TopologyBuilder(8).spec(), &node, {defaultPolicy()}, kNow);
  auto first = transitionEvents(nullptr, good);
  ASSERT_EQ(first.size(), 1u);
  EXPECT_EQ(first[0].type, "Normal");
  EXPECT_EQ(first[0].reason, "TopologyValidated");

  json status = reportStatus(good, nullptr, 1, kNow);
  EXPECT_TRUE(transitionEvents(status, good).empty());

  Verdict bad = judge(TopologyBuilder(8).pair(2, 5, "NV18", "NS").spec(), &node, {defaultPolicy()}, kNow);
  auto broke = transitionEvents(status, bad);
  ASSERT_EQ(broke.size(), 2u);
  EXPECT_EQ(broke[0].type, "Warning");
  EXPECT_EQ(broke[0].reason, "TopologyNotValidated");
  EXPECT_EQ(broke[1].reason, "P2PUnavailable");
  EXPECT_NE(broke[1].message.find("GPU2-GPU5"), std::string::npos);
  EXPECT_NE(broke[1].message.find("NCCL falls back to shared memory"), std::string::npos);

  json badStatus = reportStatus(bad, status, 2, kNow);
  EXPECT_TRUE(transitionEvents(badStatus, bad).empty());
  auto fixed = transitionEvents(badStatus, good);
  ASSERT_EQ(fixed.size(), 2u);
  EXPECT_EQ(fixed[0].type, "Normal");
  EXPECT_EQ(fixed[0].reason, "TopologyValidated");
  EXPECT_EQ(fixed[1].type, "Normal");
  EXPECT_EQ(fixed[1].reason, "AllPairsP2P");

  // A node that starts bad: a warning per problem, no Normal noise.
  auto startsBad = transitionEvents(nullptr, bad);
  ASSERT_EQ(startsBad.size(), 2u);
  for (const auto& e : startsBad) EXPECT_EQ(e.type, "Warning");
}

json nodeWith(json labels, json taints = json::array()) {
  return {{"metadata", {{"name", "gpu-0"}, {"resourceVersion", "42"}, {"labels", labels}}},
          {"spec", {{"taints", taints}}}};
}

TEST(NodePatch, LabelsOnlyWhenTheyDiffer) {
  Node facts = gpuNode(8);
  Verdict v = judge(TopologyBuilder(8).spec(), &facts, {defaultPolicy()}, kNow);
  json patch = nodePatch(nodeWith({{"kubernetes.io/hostname", "gpu-0"}}), &v);
  ASSERT_TRUE(patch.is_object());
  EXPECT_EQ(patch["metadata"]["resourceVersion"], "42");
  EXPECT_EQ(patch["metadata"]["labels"]["podshaper.io/topology-validated"], "true");
  EXPECT_EQ(patch["metadata"]["labels"].size(), 5u);
  EXPECT_FALSE(patch.contains("spec"));

  json labelled = nodeWith({{"kubernetes.io/hostname", "gpu-0"}});
  for (const auto& [k, value] : nodeLabels(v)) labelled["metadata"]["labels"][k] = value;
  EXPECT_TRUE(nodePatch(labelled, &v).is_null());

  // The report is gone: podshaper's labels go, others stay.
  json removal = nodePatch(labelled, nullptr);
  EXPECT_EQ(removal["metadata"]["labels"].size(), 5u);
  EXPECT_TRUE(removal["metadata"]["labels"]["podshaper.io/gpu-count"].is_null());
  EXPECT_TRUE(nodePatch(nodeWith({{"kubernetes.io/hostname", "gpu-0"}}), nullptr).is_null());
}

TEST(NodePatch, TheNVLinkDomainLabelComesAndGoesWithTheDomain) {
  Node facts = gpuNode(4);
  Verdict in = judge(TopologyBuilder(4).fabric().spec(), &facts, {defaultPolicy()}, kNow);
  json node = nodeWith({{"kubernetes.io/hostname", "gpu-0"}});
  json patch = nodePatch(node, &in);
  EXPECT_EQ(patch["metadata"]["labels"]["podshaper.io/nvlink-domain"], "9277d399-0674-44a9-b64e-d85bb19ce2b0.32766");
  for (const auto& [k, value] : nodeLabels(in)) node["metadata"]["labels"][k] = value;
  EXPECT_TRUE(nodePatch(node, &in).is_null());

  // The GPUs report no fabric any more (or a GPU went to another clique): the label goes.
  Verdict out = judge(TopologyBuilder(4).spec(), &facts, {defaultPolicy()}, kNow);
  patch = nodePatch(node, &out);
  ASSERT_TRUE(patch["metadata"]["labels"].contains("podshaper.io/nvlink-domain"));
  EXPECT_TRUE(patch["metadata"]["labels"]["podshaper.io/nvlink-domain"].is_null());
  Verdict mixed = judge(TopologyBuilder(4).fabric().gpuFabric(3, [](GpuFabric& f) { f.cliqueId = 1; }).spec(), &facts,
                        {defaultPolicy()}, kNow);
  EXPECT_TRUE(nodePatch(node, &mixed)["metadata"]["labels"]["podshaper.io/nvlink-domain"].is_null());
  // The report gone: with the others.
  EXPECT_TRUE(nodePatch(node, nullptr)["metadata"]["labels"]["podshaper.io/nvlink-domain"].is_null());
}

TEST(NodePatch, TaintOnFailureComesAndGoes) {
  Node facts = gpuNode(8);
  Policy tainting = defaultPolicy();
  tainting.requirements.taintEffect = "NoSchedule";
  Verdict bad = judge(TopologyBuilder(8).p2p("NS").spec(), &facts, {tainting}, kNow);
  json other = {{"key", "nvidia.com/gpu"}, {"effect", "NoSchedule"}};
  json node = nodeWith(nodeLabels(bad), json::array({other}));
  json patch = nodePatch(node, &bad);
  ASSERT_TRUE(patch.contains("spec"));
  ASSERT_EQ(patch["spec"]["taints"].size(), 2u);
  EXPECT_EQ(patch["spec"]["taints"][0], other);
  EXPECT_EQ(patch["spec"]["taints"][1]["key"], "podshaper.io/topology-not-validated");
  EXPECT_EQ(patch["spec"]["taints"][1]["value"], "P2PUnavailable");
  EXPECT_EQ(patch["spec"]["taints"][1]["effect"], "NoSchedule");

  node["spec"]["taints"] = patch["spec"]["taints"];
  EXPECT_TRUE(nodePatch(node, &bad).is_null());

  Verdict good = judge(TopologyBuilder(8).spec(), &facts, {tainting}, kNow);
  json healed = nodePatch(node, &good);
  EXPECT_EQ(healed["spec"]["taints"], json::array({other}));
}

TEST(NodeConditionPatch, TheVerdictAsANodeConditionWrittenOnlyWhenItChanges) {
  Node facts = gpuNode(8);
  Verdict good = judge(TopologyBuilder(8).spec(), &facts, {defaultPolicy()}, kNow);
  json node = nodeWith({{"kubernetes.io/hostname", "gpu-0"}});
  node["status"]["conditions"] = json::array({{{"type", "Ready"}, {"status", "True"}}});
  json patch = nodeConditionPatch(node, &good, kNow);
  ASSERT_EQ(patch["status"]["conditions"].size(), 1u);  // a strategic merge by type: Ready stays
  json c = patch["status"]["conditions"][0];
  EXPECT_EQ(c["type"], "GPUTopologyValidated");
  EXPECT_EQ(c["status"], "True");
  EXPECT_EQ(c["reason"], "RequirementsMet");
  EXPECT_EQ(c["lastTransitionTime"], formatTime(kNow));
  EXPECT_EQ(c["lastHeartbeatTime"], c["lastTransitionTime"]);

  node["status"]["conditions"].push_back(c);
  EXPECT_TRUE(nodeConditionPatch(node, &good, kNow + 600).is_null());  // steady: nothing

  Verdict bad = judge(TopologyBuilder(8).p2p("NS").spec(), &facts, {defaultPolicy()}, kNow);
  json failed = nodeConditionPatch(node, &bad, kNow + 600)["status"]["conditions"][0];
  EXPECT_EQ(failed["status"], "False");
  EXPECT_EQ(failed["reason"], "P2PUnavailable");
  EXPECT_EQ(failed["lastTransitionTime"], formatTime(kNow + 600));
  EXPECT_NE(failed["message"].get<std::string>().find("peer-to-peer"), std::string::npos) << failed["message"];

  // The report is gone: the condition goes, the kubelet's stay.
  EXPECT_EQ(nodeConditionPatch(node, nullptr, kNow),
            json::parse(R"({"status":{"conditions":[{"type":"GPUTopologyValidated","$patch":"delete"}]}})"));
  EXPECT_TRUE(nodeConditionPatch(nodeWith(json::object()), nullptr, kNow).is_null());
}

}  // namespace
}  // namespace podshaper
