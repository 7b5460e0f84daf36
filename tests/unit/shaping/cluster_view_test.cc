#include "shaping/cluster_view.h"

#include <gtest/gtest.h>

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

}  // namespace
}  // namespace podshaper
