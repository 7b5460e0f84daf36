#include "judging/policy_status.h"

#include <gtest/gtest.h>

#include "base/timefmt.h"

namespace podshaper {
namespace {

using json = nlohmann::json;

constexpr long long kT0 = 1780000000;

json policy(const json& selector, const json& requirements = {{"requireP2PAllPairs", true}}) {
  return {{"apiVersion", "podshaper.io/v1alpha1"},
          {"kind", "TopologyPolicy"},
          {"metadata", {{"name", "h100"}, {"generation", 3}}},
          {"spec", {{"nodeSelector", selector}, {"requirements", requirements}}}};
}

NodeFacts facts(const std::string& name, SharedLabels labels, const std::string& validated, const std::string& reason) {
  NodeFacts n;
  n.node.name = name;
  n.node.labels = std::move(labels);
  n.validated = validated;
  n.validatedReason = reason;
  return n;
}

std::vector<NodeFacts> nodes() {
  return {facts("gpu-c", {{"pool", "h100"}}, "False", "P2PUnavailable"), facts("gpu-a", {{"pool", "h100"}}, "True", ""),
          facts("gpu-b", {{"pool", "h100"}}, "False", "MemlockLimited"), facts("gpu-d", {{"pool", "h100"}}, "", ""),
          facts("cpu-0", {{"pool", "cpu"}}, "False", "NoGPUs")};
}

TEST(PolicyStatus, CountsTheNodesItSelectsAndNamesTheFailingOnes) {
  const json s = policyStatus(policy({{"matchLabels", {{"pool", "h100"}}}}), nodes(), nullptr, kT0);
  EXPECT_EQ(s["observedGeneration"], 3);
  EXPECT_EQ(s["selectedNodes"], 4);
  EXPECT_EQ(s["validatedNodes"], 1);
  EXPECT_EQ(s["failingNodes"], 2);
  EXPECT_EQ(s["unreportedNodes"], 1);
  EXPECT_EQ(s["failing"], json::parse(R"([{"name":"gpu-b","reason":"MemlockLimited"},
                                          {"name":"gpu-c","reason":"P2PUnavailable"}])"));
  ASSERT_EQ(s["conditions"].size(), 1u);
  EXPECT_EQ(s["conditions"][0]["type"], "Accepted");
  EXPECT_EQ(s["conditions"][0]["status"], "True");
  EXPECT_EQ(s["conditions"][0]["reason"], "Valid");
  EXPECT_EQ(s["conditions"][0]["lastTransitionTime"], formatTime(kT0));
}

TEST(PolicyStatus, ItSelectsByTheNodesOwnLabelsNotPodshapers) {
  std::vector<NodeFacts> labelled = {facts("a", {{"podshaper.io/gpu-count", "8"}}, "True", ""),
                                     facts("b", {{"podshaper.io/gpu-count", "8"}, {"pool", "x"}}, "True", "")};
  EXPECT_EQ(policyStatus(policy({{"matchLabels", {{"podshaper.io/gpu-count", "8"}}}}), labelled, nullptr, kT0)
                ["selectedNodes"],
            0);
  EXPECT_EQ(policyStatus(policy({{"matchLabels", {{"pool", "x"}}}}), labelled, nullptr, kT0)["selectedNodes"], 1);
}

TEST(PolicyStatus, AnEmptySelectorSelectsEveryNode) {
  EXPECT_EQ(policyStatus(policy(json::object()), nodes(), nullptr, kT0)["selectedNodes"], 5);
}

TEST(PolicyStatus, AnUnreadablePolicySaysWhyAndCountsNothing) {
  const json s = policyStatus(policy(json::object(), {{"minLink", "fast"}}), nodes(), nullptr, kT0);
  EXPECT_EQ(s["conditions"][0]["status"], "False");
  EXPECT_EQ(s["conditions"][0]["reason"], "Invalid");
  const std::string m = s["conditions"][0]["message"];
  EXPECT_NE(m.find("spec.requirements.minLink: \"fast\""), std::string::npos) << m;
  EXPECT_NE(m.find("leaves this policy out until it is fixed"), std::string::npos) << m;
  EXPECT_FALSE(s.contains("selectedNodes"));
}

TEST(PolicyStatus, TheTransitionTimeStaysWhileTheConditionDoes) {
  const json first = policyStatus(policy(json::object()), nodes(), nullptr, kT0);
  const json later = policyStatus(policy(json::object()), {}, first, kT0 + 600);
  EXPECT_EQ(later["conditions"][0]["lastTransitionTime"], formatTime(kT0));
  EXPECT_EQ(later["selectedNodes"], 0);
  const json broken = policyStatus(policy(json::object(), {{"minLink", "fast"}}), {}, later, kT0 + 900);
  EXPECT_EQ(broken["conditions"][0]["lastTransitionTime"], formatTime(kT0 + 900));
}

TEST(PolicyStatus, AtMostTenFailingNodesAreNamed) {
  std::vector<NodeFacts> many;
  for (int i = 0; i < 25; ++i) many.push_back(facts("n" + std::to_string(100 + i), {}, "False", "Stale"));
  const json s = policyStatus(policy(json::object()), many, nullptr, kT0);
  EXPECT_EQ(s["failingNodes"], 25);
  ASSERT_EQ(s["failing"].size(), kFailingNodesNamed);
  EXPECT_EQ(s["failing"][0]["name"], "n100");
}

TEST(PolicyStatus, ThePatchNullsWhatWentAndIsNullWhenNothingChanged) {
  const json accepted = policyStatus(policy(json::object()), nodes(), nullptr, kT0);
  EXPECT_TRUE(policyStatusPatch(accepted, accepted).is_null());
  const json invalid = policyStatus(policy(json::object(), {{"minLink", "fast"}}), nodes(), accepted, kT0);
  const json patch = policyStatusPatch(accepted, invalid);
  EXPECT_TRUE(patch["status"]["selectedNodes"].is_null());
  EXPECT_TRUE(patch["status"]["failing"].is_null());
  EXPECT_EQ(patch["status"]["conditions"][0]["reason"], "Invalid");
  json merged = {{"status", accepted}};
  merged.merge_patch(patch);
  EXPECT_EQ(merged["status"], invalid);
}

TEST(PolicyStatus, TheSpecsKeyChangesWithAGenerationNotWithAStatus) {
  json a = policy(json::object());
  a["metadata"]["uid"] = "u1";
  const std::string before = policySpecsKey({a});
  a["status"] = policyStatus(a, nodes(), nullptr, kT0);
  EXPECT_EQ(policySpecsKey({a}), before);
  a["metadata"]["generation"] = 4;
  EXPECT_NE(policySpecsKey({a}), before);
  EXPECT_NE(policySpecsKey({}), before);
}

}  // namespace
}  // namespace podshaper
