// The placement contract: the requirements the webhook writes, matched as the scheduler
// matches them and worded as the operator explains them.
#include "api/node_labels.h"

#include <gtest/gtest.h>

#include <map>

#include "api/policy.h"

namespace podshaper {
namespace {

using nlohmann::json;

// Whether a node labelled podshaper.io/memlock=`label` (validated) meets what a pod asking
// `asked` requires.
bool grants(const std::string& label, const MemlockLimit& asked) {
  const std::map<std::string, std::string> labels = {{std::string(names::kTopologyValidated), "true"},
                                                     {std::string(names::kMemlock), label}};
  auto valueOf = [&](const std::string& key) -> const std::string* {
    auto it = labels.find(key);
    return it == labels.end() ? nullptr : &it->second;
  };
  return matchesAnyTerm(nodeRequirements({asked, std::nullopt, false}), valueOf);
}

TEST(NodeRequirements, MemlockAdmitsUnlimitedOrEnoughOneTermEach) {
  auto terms = nodeRequirements({MemlockLimit{}, std::nullopt, false});
  ASSERT_EQ(terms.size(), 1u);
  EXPECT_EQ(terms[0][1].toJson(), json::parse(R"({"key":"podshaper.io/memlock","operator":"In","values":["unlimited"]})"));
  terms = nodeRequirements({MemlockLimit{4194304}, 8, true});
  ASSERT_EQ(terms.size(), 2u);
  EXPECT_EQ(terms[1][1].toJson(), json::parse(R"({"key":"podshaper.io/memlock","operator":"Gt","values":["4194303"]})"));
  std::vector<std::string> words;
  for (const NodeRequirement& r : terms[1]) words.push_back(r.words());
  EXPECT_EQ(words, (std::vector<std::string>{"podshaper.io/topology-validated=true", "podshaper.io/memlock Gt [4194303]",
                                             "podshaper.io/gpu-count=8", "podshaper.io/p2p=all"}));
  EXPECT_EQ(memlockAskedWords({terms[0][1], terms[1][1]}), "at least 4Mi or unlimited");
}

TEST(NodeRequirements, WhichMemlockLabelsGrantWhat) {
  const MemlockLimit unlimited, four{4194304};
  EXPECT_TRUE(grants("unlimited", unlimited));
  EXPECT_TRUE(grants("unlimited", four));
  EXPECT_TRUE(grants(memlockLabel(four), four));
  EXPECT_TRUE(grants("68719476736", four));
  EXPECT_FALSE(grants("4194303", four));
  EXPECT_FALSE(grants("68719476736", unlimited));
  for (const char* word : {"not-granted", "not-applied", "unknown", "limited", "", "4Mi", "99999999999999999999"}) {
    EXPECT_FALSE(grants(word, four)) << word;
    EXPECT_FALSE(grants(word, unlimited)) << word;
  }
  // The operator's words for a node that cannot grant it now: the webhook's pods stay off it.
  for (std::string_view word : {names::kMemlockNotGranted, names::kMemlockNotApplied}) {
    EXPECT_FALSE(grants(std::string(word), four)) << word;
    EXPECT_FALSE(grants(std::string(word), MemlockLimit{1})) << word;
  }
}

TEST(NodeRequirements, GpuCountReadsOnlyAsTheOperatorWritesIt) {
  EXPECT_EQ(gpuCountLabel(8), "8");
  EXPECT_EQ(gpuCountOf("8"), 8u);
  EXPECT_FALSE(gpuCountOf("08"));
  EXPECT_FALSE(gpuCountOf("8 "));
  EXPECT_FALSE(gpuCountOf("eight"));
}

TEST(NodeRequirement, MatchesAsTheSchedulerDoes) {
  const std::string four = "4", word = "x";
  const NodeRequirement gt{"k", MatchOp::kGt, {"3"}}, lt{"k", MatchOp::kLt, {"5"}};
  EXPECT_TRUE(gt.matches(&four));
  EXPECT_FALSE(gt.matches(nullptr));
  EXPECT_FALSE(gt.matches(&word));
  EXPECT_TRUE(lt.matches(&four));
  EXPECT_FALSE((NodeRequirement{"k", MatchOp::kGt, {"1", "2"}}.matches(&four)));  // Gt takes one value
  EXPECT_TRUE((NodeRequirement{"k", MatchOp::kNotIn, {"x"}}.matches(nullptr)));
  EXPECT_TRUE((NodeRequirement{"k", MatchOp::kDoesNotExist, {}}.matches(nullptr)));
  EXPECT_FALSE((NodeRequirement{"k", MatchOp::kExists, {}}.matches(nullptr)));
  // An operator the scheduler does not know matches no node.
  const NodeRequirement odd = requirementFromJson(json{{"key", "k"}, {"operator", "Ge"}, {"values", {"4"}}});
  EXPECT_FALSE(odd.matches(&four));
  EXPECT_EQ(requirementFromJson(gt.toJson()), gt);
}

TEST(NodeRequirement, APodsTermsEachCarryItsNodeSelector) {
  const json spec = json::parse(R"({"nodeSelector": {"pool": "a"},
    "affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
      {"matchExpressions": [{"key": "podshaper.io/memlock", "operator": "Gt", "values": ["4194303"]}]},
      {"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["gpu-1"]}]}]}}}})");
  const auto terms = podNodeTerms(spec);
  ASSERT_EQ(terms.size(), 2u);
  EXPECT_EQ(terms[0], (std::vector<NodeRequirement>{{"podshaper.io/memlock", MatchOp::kGt, {"4194303"}},
                                                    labelIs("pool", "a")}));
  ASSERT_EQ(terms[1].size(), 2u);
  EXPECT_TRUE(terms[1][0].field);
  EXPECT_EQ(terms[1][1], labelIs("pool", "a"));
  // No affinity: the nodeSelector alone; nothing at all: one empty term, which every node meets.
  EXPECT_EQ(podNodeTerms(json{{"nodeSelector", {{"pool", "a"}}}}),
            (std::vector<std::vector<NodeRequirement>>{{labelIs("pool", "a")}}));
  EXPECT_EQ(podNodeTerms(json::object()), (std::vector<std::vector<NodeRequirement>>{{}}));
}

TEST(LabelSelector, MatchesByTheSameRequirements) {
  LabelSelector s;
  s.matchLabels = {{"pool", "a"}};
  s.matchExpressions = {{"zone", MatchOp::kNotIn, {"z1"}}};
  EXPECT_TRUE(s.matches({{"pool", "a"}}));
  EXPECT_FALSE(s.matches({{"pool", "a"}, {"zone", "z1"}}));
  EXPECT_FALSE(s.matches({{"pool", "b"}}));
}

}  // namespace
}  // namespace podshaper
