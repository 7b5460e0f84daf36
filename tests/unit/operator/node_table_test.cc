#include "operator/node_table.h"

#include <gtest/gtest.h>

#include <map>

namespace podshaper::op {
namespace {

using nlohmann::json;

json nodeNamed(const std::string& name, const std::string& validatedLabel) {
  return {{"metadata", {{"name", name}, {"labels", {{"podshaper.io/topology-validated", validatedLabel}}}}}};
}

json reportSaying(const std::string& status, const std::string& reason) {
  return {{"status", {{"conditions", {{{"type", "Validated"}, {"status", status}, {"reason", reason}}}}}}};
}

struct Caches {
  std::map<std::string, json> nodes, reports;
  NodeTable table{[this](const std::string& n) { return find(nodes, n); },
                  [this](const std::string& n) { return find(reports, n); }};
  static std::optional<json> find(const std::map<std::string, json>& m, const std::string& n) {
    auto it = m.find(n);
    if (it == m.end()) return std::nullopt;
    return it->second;
  }
};

TEST(NodeTable, OnlyTheNamesThatChangedAreReadAgain) {
  Caches c;
  c.nodes = {{"b", nodeNamed("b", "false")}, {"a", nodeNamed("a", "true")}};
  c.reports = {{"a", reportSaying("True", "AllChecksPassed")}, {"b", reportSaying("False", "P2PUnavailable")}};
  c.table.changed({"b", "a"});
  auto first = c.table.snapshot();
  ASSERT_EQ(first->size(), 2u);
  EXPECT_EQ((*first)[0].node.name, "a");
  EXPECT_EQ((*first)[1].notValidatedReason, "P2PUnavailable");
  EXPECT_EQ(c.table.reads(), 4u);  // two Nodes, two reports

  EXPECT_EQ(c.table.snapshot(), first);  // nothing changed: nothing read, the same vector
  EXPECT_EQ(c.table.reads(), 4u);

  c.reports["b"] = reportSaying("True", "AllChecksPassed");
  c.nodes["b"] = nodeNamed("b", "true");
  c.table.changed({"b"});
  auto second = c.table.snapshot();
  EXPECT_EQ(c.table.reads(), 6u);
  EXPECT_EQ((*second)[1].validated, "True");
  EXPECT_EQ((*second)[1].notValidatedReason, "");
  EXPECT_EQ((*first)[1].validated, "False");  // a snapshot held keeps what it held
}

TEST(NodeTable, ANodeThatWentLeavesAndAReportWithoutItsNodeIsNotANode) {
  Caches c;
  c.nodes = {{"a", nodeNamed("a", "false")}, {"c", nodeNamed("c", "false")}};
  c.reports = {{"b", reportSaying("True", "AllChecksPassed")}};
  c.table.changed({"a", "b", "c"});
  auto facts = c.table.snapshot();
  ASSERT_EQ(facts->size(), 2u);
  EXPECT_EQ((*facts)[0].notValidatedReason, "no GPUTopologyReport");

  c.nodes.erase("a");
  c.nodes["b"] = nodeNamed("b", "true");
  c.table.changed({"a", "b"});
  facts = c.table.snapshot();
  ASSERT_EQ(facts->size(), 2u);
  EXPECT_EQ((*facts)[0].node.name, "b");
  EXPECT_EQ((*facts)[0].validated, "True");
  EXPECT_EQ((*facts)[1].node.name, "c");
}

TEST(NodeTable, NodesShareTheirLabelsStrings) {
  Caches c;
  for (const char* name : {"a", "b", "c"}) {
    json node = nodeNamed(name, "true");
    node["metadata"]["labels"]["nvidia.com/gpu.product"] = "NVIDIA-H100-80GB-HBM3";
    node["metadata"]["labels"]["kubernetes.io/hostname"] = name;
    c.nodes[name] = node;
  }
  c.table.changed({"a", "b", "c"});
  auto facts = c.table.snapshot();
  ASSERT_EQ(facts->size(), 3u);
  const std::string* product = (*facts)[0].node.labels.find("nvidia.com/gpu.product");
  ASSERT_NE(product, nullptr);
  EXPECT_EQ(*product, "NVIDIA-H100-80GB-HBM3");
  EXPECT_EQ((*facts)[2].node.labels.find("nvidia.com/gpu.product"), product);  // one string for every node
  EXPECT_EQ(*(*facts)[2].node.labels.find("kubernetes.io/hostname"), "c");
}

}  // namespace
}  // namespace podshaper::op
