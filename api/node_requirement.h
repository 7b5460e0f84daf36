#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "base/result.h"

// One requirement on a node's label (or, for matchFields, its name), as a pod's node
// affinity, a nodeSelector and a TopologyPolicy's nodeSelector write them: one type, one
// matcher and one wording for the webhook that writes them, the operator that explains a
// pod they keep Pending and the policies that select nodes by them.
namespace podshaper {

// The operators of a NodeSelectorRequirement. A metav1.LabelSelector takes the first four.
enum class MatchOp { kIn, kNotIn, kExists, kDoesNotExist, kGt, kLt };
std::string_view toString(MatchOp op);  // "In", "NotIn", "Exists", "DoesNotExist", "Gt", "Lt"
std::optional<MatchOp> parseMatchOp(std::string_view text);

struct NodeRequirement {
  std::string key;
  MatchOp op = MatchOp::kIn;
  std::vector<std::string> values;
  bool field = false;  // a matchFields requirement: `key` is metadata.name, matched against the node's name

  // As kube-scheduler matches it against a node whose label (or name) is `value`
  // (nullptr: the node has no such label): Gt and Lt take one value, and both it and the
  // label must read as a base-10 int64.
  bool matches(const std::string* value) const;
  // For people: "podshaper.io/p2p=all", "zone In [a, b]", "podshaper.io/memlock Gt [4194303]",
  // "gpu Exists".
  std::string words() const;
  // {"key": ..., "operator": ..., "values": [...]}: how a pod's node affinity carries it.
  nlohmann::json toJson() const;

  bool operator==(const NodeRequirement&) const = default;
};

// A requirement that `key` is `value`: nodeSelector's pairs, matchLabels' entries.
NodeRequirement labelIs(std::string_view key, std::string value);

// Whether a node meets every requirement of one of `terms` (nodeSelectorTerms: ORed, each
// one's requirements ANDed), each label read through valueOf(key): a const std::string*,
// nullptr when absent.
template <class ValueOf>
bool matchesAnyTerm(const std::vector<std::vector<NodeRequirement>>& terms, const ValueOf& valueOf) {
  for (const auto& term : terms) {
    bool all = true;
    for (const NodeRequirement& r : term) all = all && r.matches(valueOf(r.key));
    if (all) return true;
  }
  return false;
}

// Reads one requirement as a pod writes it; values that are not strings are left out and an
// unknown operator never matches, as the scheduler would refuse it. `field`: from matchFields.
NodeRequirement requirementFromJson(const nlohmann::json& requirement, bool field = false);

// A pod's node requirements as the scheduler reads them: its required node affinity's
// nodeSelectorTerms (ORed), each with the nodeSelector's pairs (ANDed); one term of the
// nodeSelector alone when it has no affinity.
std::vector<std::vector<NodeRequirement>> podNodeTerms(const nlohmann::json& podSpec);

}  // namespace podshaper
