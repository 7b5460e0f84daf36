#include "shaping/cluster_view.h"

#include <gtest/gtest.h>

#include "shaping/node_class.h"
#include "pod_builder.h"

namespace podshaper {
namespace {

using nlohmann::json;

TEST(ClusterView, BuiltFromApiObjects) {
  std::vector<json> namespaces = {
      json::parse(R"({"metadata":{"name":"ml","labels":{"pod-security.kubernetes.io/enforce":"baseline"}}})"),
      json::parse(R"({"metadata":{"name":"bare"}})"),
      json::parse(R"({"metadata":{"labels":{"x":"y"}}})"),  // no name: skipped
      json::parse(R"("not an object")")};
  std::vector<json> nodes = {
      json::parse(R"({"metadata":{"name":"h100","labels":{"podshaper.io/topology-validated":"true","podshaper.io/gpu-count":"8"}},
                     "status":{"allocatable":{"nvidia.com/gpu":"8"},"capacity":{"memory":"2Ti"}}})"),
      json::parse(R"({"metadata":{"name":"cpu"},"status":{"allocatable":{"cpu":"64"},"capacity":{"memory":"256Gi"}}})"),
      json::parse(R"({"metadata":{"name":"judged-no-gpus","labels":{"podshaper.io/topology-validated":"false"}}})"),
      json::parse(R"({"metadata":{"name":"bad-quantities"},"status":{"allocatable":{"nvidia.com/gpu":"x"},"capacity":{"memory":7}}})"),
      json::parse(R"([1,2])")};
  ClusterView view = buildClusterView(namespaces, nodes);
  ASSERT_EQ(view.namespaceLabels.size(), 2u);
  EXPECT_EQ(view.namespaceLabels["ml"].at("pod-security.kubernetes.io/enforce"), "baseline");
  EXPECT_TRUE(view.namespaceLabels["bare"].empty());
  ASSERT_EQ(view.nodes.size(), 2u);  // CPU nodes and nodes without data are left out
  EXPECT_EQ(view.nodes[0].name, "h100");
  EXPECT_EQ(view.nodes[0].gpus(), 8u);
  EXPECT_EQ(*view.nodes[0].memoryBytes, 2LL << 40);
  EXPECT_EQ(view.nodes[1].name, "judged-no-gpus");
  EXPECT_EQ(view.nodes[1].gpus(), 0u);
  EXPECT_FALSE(view.nodes[1].memoryBytes.has_value());
  EXPECT_TRUE(view.hasPodshaperLabels());
}

TEST(ClusterView, NoLabelsUntilTheOperatorJudges) {
  ClusterView view = buildClusterView(
      {}, {json::parse(R"({"metadata":{"name":"a"},"status":{"allocatable":{"nvidia.com/gpu":"4"}}})")});
  EXPECT_FALSE(view.hasPodshaperLabels());
  EXPECT_EQ(view.nodes.size(), 1u);
}

TEST(ClusterView, NodesAlikeInWhatPlacementReadsAreOneKind) {
  ClusterView view;
  for (int i = 0; i < 1000; ++i) view.nodes.push_back(testing::gpuNode("h100-" + std::to_string(i), 8));
  view.nodes[10].labels.set("feature.node.kubernetes.io/cpu", "x");  // not read by placement: the same kind
  view.nodes[20].labels.set("podshaper.io/p2p", "partial");
  view.nodes[30].memoryBytes = 1LL << 40;
  view.nodes.push_back(testing::gpuNode("l4", 4));
  const auto kinds = nodeKinds(view.nodes);
  ASSERT_EQ(kinds.size(), 4u);
  EXPECT_EQ(kinds[0].members.size(), 998u);  // 1,000 less the two that differ
  EXPECT_EQ(kinds[0].members.front(), 0u);
  EXPECT_EQ(kinds[1].members, std::vector<std::size_t>{20});
  EXPECT_EQ(kinds[2].members, std::vector<std::size_t>{30});
  EXPECT_EQ(kinds[3].node.gpus(), 4u);
  EXPECT_FALSE(kinds[0].node.labels.contains("feature.node.kubernetes.io/cpu"));
}

// Placement reads a built view's kinds and a hand-built view's nodes alike: the same node
// class, the same words, the same nodes named in view order.
TEST(ClusterView, PlacementSaysTheSameFromKindsAsFromEveryNode) {
  ClusterView byHand;
  for (int i = 0; i < 30; ++i) {
    Node n = testing::gpuNode("n" + std::to_string(i), i % 3 == 0 ? 4 : 8, i % 2 ? "all" : "partial", i % 5 != 0,
                              (64LL + i % 4) << 30);
    byHand.nodes.push_back(std::move(n));
  }
  ClusterView built = byHand;
  built.kinds = nodeKinds(built.nodes);
  ASSERT_LT(built.kinds.size(), built.nodes.size());
  Config config;
  for (bool exclusive : {true, false}) {
    for (std::optional<uint64_t> gpus : {std::optional<uint64_t>(4), std::optional<uint64_t>(8),
                                         std::optional<uint64_t>(16), std::optional<uint64_t>()}) {
      const NodeClass a = resolveNodeClass(gpus, std::nullopt, exclusive, config.node, &byHand);
      const NodeClass b = resolveNodeClass(gpus, std::nullopt, exclusive, config.node, &built);
      EXPECT_EQ(a.gpus, b.gpus);
      EXPECT_EQ(a.memoryBytes, b.memoryBytes);
      EXPECT_EQ(a.p2pAllPairs, b.p2pAllPairs);
      EXPECT_EQ(a.sizes, b.sizes);
      EXPECT_EQ(a.largestNode, b.largestNode);
      EXPECT_EQ(a.warnings, b.warnings);
    }
  }
  // Every 8-GPU node waits to be validated: the first three are named, in view order.
  for (Node& n : built.nodes) {
    if (n.gpus() == 8) n.labels.set("podshaper.io/topology-validated", "false");
  }
  built.kinds = nodeKinds(built.nodes);
  const NodeClass waiting = resolveNodeClass(8, std::nullopt, true, config.node, &built);
  ASSERT_FALSE(waiting.warnings.empty());
  EXPECT_NE(waiting.warnings[0].find("n1 (not validated (kubectl describe gtr n1)), n2 (not validated "
                                     "(kubectl describe gtr n2)), n4 (not validated (kubectl describe gtr n4)) and 17 more"),
            std::string::npos)
      << waiting.warnings[0];
}

}  // namespace
}  // namespace podshaper
