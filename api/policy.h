#pragma once

#include <algorithm>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "api/node_requirement.h"
#include "base/result.h"

namespace podshaper {

// A metav1.LabelSelector: matchLabels and matchExpressions (In, NotIn, Exists,
// DoesNotExist), matched as a pod's node affinity is (NodeRequirement). An empty selector
// selects everything.
struct LabelSelector {
  std::map<std::string, std::string> matchLabels;
  std::vector<NodeRequirement> matchExpressions;

  bool matches(const std::map<std::string, std::string>& labels) const;
  // The same, each label read through valueOf(key): a const std::string*, nullptr when absent.
  template <class ValueOf>
  bool matchesBy(const ValueOf& valueOf) const;
};

template <class ValueOf>
bool LabelSelector::matchesBy(const ValueOf& valueOf) const {
  // A matchLabels entry is In [v], compared where it lies rather than made into a
  // NodeRequirement for every node it is matched against.
  for (const auto& [k, v] : matchLabels) {
    const std::string* have = valueOf(k);
    if (have == nullptr || *have != v) return false;
  }
  return std::all_of(matchExpressions.begin(), matchExpressions.end(),
                     [&](const NodeRequirement& e) { return e.matches(valueOf(e.key)); });
}

// Link classes from best to worst, as `nvidia-smi topo -m` names them (NV# is NVLink).
enum class LinkClass { NVLink, PIX, PXB, PHB, NODE, SYS };
std::optional<LinkClass> parseLinkClass(const std::string& text);  // "NVLink", "PIX", ... and "NV18"
const char* toString(LinkClass link);

// What a TopologyPolicy asks of the nodes it selects. Unset means "not asked".
struct Requirements {
  std::optional<long long> minGPUs;
  bool requireP2PAllPairs = false;
  std::optional<LinkClass> minLink;
  std::optional<double> minBandwidthGBps;
  bool requireMemlockUnlimited = false;
  bool requireNVLinkDomain = false;  // the node's GPUs in a multi-node NVLink domain (MNNVL)
  std::optional<long long> maxReportAgeSeconds;
  std::optional<std::string> taintEffect;  // taintOnFailure.effect
};

// A TopologyPolicy (podshaper.io/v1alpha1), cluster-scoped.
struct Policy {
  std::string name{};
  LabelSelector nodeSelector{};
  Requirements requirements{};
};

// Reads a TopologyPolicy object. The error names the policy and the field:
//   TopologyPolicy "gpu-a": spec.requirements.minLink: "fast": expected one of NVLink, PIX, ...
Result<Policy> policyFromJson(const nlohmann::json& object);

// The report age after which a node is judged stale when no selected policy sets maxReportAge.
inline constexpr long long kDefaultMaxReportAgeSeconds = 600;

// The requirements of every policy that selects a node, combined so that each
// one holds (the strictest of each), and the names of those policies, sorted.
struct EffectiveRequirements {
  Requirements requirements;
  std::vector<std::string> policies;
};
EffectiveRequirements effectiveRequirements(const std::vector<Policy>& policies,
                                            const std::map<std::string, std::string>& nodeLabels);

}  // namespace podshaper
