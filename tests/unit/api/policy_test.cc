#include "api/policy.h"

#include <gtest/gtest.h>

#include <initializer_list>
#include <map>
#include <string>
#include <utility>

#include "api/node.h"

namespace podshaper {
namespace {

using nlohmann::json;

json policy(const std::string& name, json spec) {
  return {{"apiVersion", "podshaper.io/v1alpha1"}, {"kind", "TopologyPolicy"},
          {"metadata", {{"name", name}}}, {"spec", std::move(spec)}};
}

TEST(Policy, ReadsEveryRequirement) {
  auto p = policyFromJson(policy("h100", {{"nodeSelector", {{"matchLabels", {{"gpu", "h100"}}}}},
                                          {"requirements", {{"minGPUs", 8}, {"requireP2PAllPairs", true},
                                                            {"minLink", "NVLink"}, {"minBandwidthGBps", 300.5},
                                                            {"requireMemlockUnlimited", true},
                                                            {"requireNVLinkDomain", true},
                                                            {"maxReportAge", "5m"}}},
                                          {"taintOnFailure", {{"effect", "NoExecute"}}}}));
  ASSERT_TRUE(p) << p.error().message;
  EXPECT_EQ(p->name, "h100");
  EXPECT_EQ(p->requirements.minGPUs, 8);
  EXPECT_TRUE(p->requirements.requireP2PAllPairs);
  EXPECT_EQ(p->requirements.minLink, LinkClass::NVLink);
  EXPECT_EQ(p->requirements.minBandwidthGBps, 300.5);
  EXPECT_TRUE(p->requirements.requireMemlockUnlimited);
  EXPECT_TRUE(p->requirements.requireNVLinkDomain);
  EXPECT_EQ(p->requirements.maxReportAgeSeconds, 300);
  EXPECT_EQ(p->requirements.taintEffect, "NoExecute");
}

TEST(Policy, EmptySpecAsksNothing) {
  auto p = policyFromJson(policy("open", json::object()));
  ASSERT_TRUE(p);
  EXPECT_TRUE(p->nodeSelector.matches({}));
  EXPECT_FALSE(p->requirements.minGPUs);
  EXPECT_FALSE(p->requirements.taintEffect);
}

TEST(Policy, BadFieldsAreNamed) {
  struct Case {
    const char* what;
    json spec;
    const char* message;
  };
  const std::vector<Case> cases = {
      {"link", {{"requirements", {{"minLink", "fast"}}}}, "spec.requirements.minLink: \"fast\": expected one of NVLink"},
      {"NV# is not a class", {{"requirements", {{"minLink", "NV18"}}}}, "spec.requirements.minLink"},
      {"negative GPUs", {{"requirements", {{"minGPUs", -1}}}}, "spec.requirements.minGPUs: expected a whole number"},
      {"age", {{"requirements", {{"maxReportAge", "10 minutes"}}}}, "spec.requirements.maxReportAge"},
      {"zero age", {{"requirements", {{"maxReportAge", "0s"}}}}, "spec.requirements.maxReportAge"},
      {"bool", {{"requirements", {{"requireP2PAllPairs", "yes"}}}}, "requireP2PAllPairs: expected true or false"},
      {"MNNVL bool", {{"requirements", {{"requireNVLinkDomain", 1}}}},
       "spec.requirements.requireNVLinkDomain: expected true or false"},
      {"unknown", {{"requirements", {{"minGPU", 8}}}}, "spec.requirements.minGPU: unknown requirement"},
      {"operator", {{"nodeSelector", {{"matchExpressions", {{{"key", "a"}, {"operator", "Has"}}}}}}},
       "spec.nodeSelector.matchExpressions[0].operator"},
      {"In without values", {{"nodeSelector", {{"matchExpressions", {{{"key", "a"}, {"operator", "In"}}}}}}},
       "In needs values"},
      {"effect", {{"taintOnFailure", {{"effect", "Evict"}}}}, "spec.taintOnFailure.effect"},
  };
  for (const auto& c : cases) {
    auto p = policyFromJson(policy("bad", c.spec));
    ASSERT_FALSE(p) << c.what;
    EXPECT_NE(p.error().message.find(c.message), std::string::npos) << c.what << ": " << p.error().message;
    EXPECT_EQ(p.error().message.rfind("TopologyPolicy \"bad\": ", 0), 0u) << p.error().message;
  }
  EXPECT_FALSE(policyFromJson(json::object()));
}

// The selector over a map and over a node's SharedLabels (the operator's table) agree.
bool selects(const LabelSelector& s, std::initializer_list<std::pair<std::string, std::string>> labels) {
  const std::map<std::string, std::string> map(labels.begin(), labels.end());
  const SharedLabels shared(labels);
  const bool byMap = s.matches(map);
  EXPECT_EQ(byMap, s.matchesBy([&](const std::string& key) { return shared.find(key); }));
  return byMap;
}

TEST(Policy, SelectorOperators) {
  LabelSelector s;
  s.matchLabels = {{"zone", "a"}};
  s.matchExpressions = {{"gpu", MatchOp::kIn, {"h100", "h200"}}, {"retired", MatchOp::kDoesNotExist, {}}};
  EXPECT_TRUE(selects(s, {{"zone", "a"}, {"gpu", "h200"}}));
  EXPECT_FALSE(selects(s, {{"zone", "b"}, {"gpu", "h200"}}));
  EXPECT_FALSE(selects(s, {{"zone", "a"}, {"gpu", "a100"}}));
  EXPECT_FALSE(selects(s, {{"zone", "a"}, {"gpu", "h100"}, {"retired", ""}}));
  LabelSelector n;
  n.matchExpressions = {{"gpu", MatchOp::kNotIn, {"l40s"}}, {"zone", MatchOp::kExists, {}}};
  EXPECT_TRUE(selects(n, {{"zone", "a"}}));
  EXPECT_FALSE(selects(n, {{"zone", "a"}, {"gpu", "l40s"}}));
  EXPECT_FALSE(selects(n, {}));
}

TEST(SharedLabels, ReadFromTheNodeTheirStringsShared) {
  const json a = {{"metadata", {{"labels", {{"zone", "a"}, {"gpu", "h100"}, {"count", 8}}}}}};
  const json b = {{"metadata", {{"labels", {{"zone", "b"}, {"gpu", "h100"}}}}}};
  StringPool pool;
  const SharedLabels la(a, pool), lb(b, pool);
  EXPECT_EQ(la.size(), 2u);  // a value that is not a string is not a label (as labelsFromJson)
  ASSERT_NE(la.find("gpu"), nullptr);
  EXPECT_EQ(la.find("gpu"), lb.find("gpu"));  // one "h100" for both nodes
  EXPECT_EQ(*la.find("zone"), "a");
  EXPECT_EQ(*lb.find("zone"), "b");
  EXPECT_EQ(la.find("count"), nullptr);
  EXPECT_EQ(la.find("z"), nullptr);
  EXPECT_EQ(SharedLabels(json::object(), pool).size(), 0u);
  EXPECT_EQ(SharedLabels(json{{"metadata", {{"labels", "x"}}}}, pool).size(), 0u);
  // Given by hand, out of order and a key twice: sorted, the last value kept.
  const SharedLabels hand{{"z", "1"}, {"a", "2"}, {"z", "3"}};
  EXPECT_EQ(hand.size(), 2u);
  EXPECT_EQ(*hand.find("z"), "3");
  EXPECT_EQ(*hand.find("a"), "2");
}

TEST(Policy, EverySelectingPolicyHolds) {
  auto all = *policyFromJson(policy("default", {{"requirements", {{"requireP2PAllPairs", true},
                                                                  {"maxReportAge", "10m"}}}}));
  auto h100 = *policyFromJson(policy("h100", {{"nodeSelector", {{"matchLabels", {{"gpu", "h100"}}}}},
                                              {"requirements", {{"minGPUs", 8}, {"minLink", "PXB"},
                                                                {"maxReportAge", "2m"}}},
                                              {"taintOnFailure", {{"effect", "PreferNoSchedule"}}}}));
  auto strict = *policyFromJson(policy("links", {{"requirements", {{"minLink", "NVLink"}, {"minGPUs", 4},
                                                                  {"requireNVLinkDomain", true}}},
                                                 {"taintOnFailure", {{"effect", "NoSchedule"}}}}));
  auto e = effectiveRequirements({h100, all, strict}, {{"gpu", "h100"}});
  EXPECT_EQ(e.policies, (std::vector<std::string>{"default", "h100", "links"}));
  EXPECT_EQ(e.requirements.minGPUs, 8);
  EXPECT_EQ(e.requirements.minLink, LinkClass::NVLink);
  EXPECT_EQ(e.requirements.maxReportAgeSeconds, 120);
  EXPECT_TRUE(e.requirements.requireP2PAllPairs);
  EXPECT_TRUE(e.requirements.requireNVLinkDomain);
  EXPECT_EQ(e.requirements.taintEffect, "NoSchedule");
  auto other = effectiveRequirements({h100, all}, {{"gpu", "l40s"}});
  EXPECT_EQ(other.policies, (std::vector<std::string>{"default"}));
  EXPECT_FALSE(other.requirements.minGPUs);
  EXPECT_FALSE(other.requirements.requireNVLinkDomain);
  EXPECT_FALSE(other.requirements.taintEffect);
}

}  // namespace
}  // namespace podshaper
