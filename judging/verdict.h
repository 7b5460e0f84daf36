#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "api/node.h"
#include "api/node_labels.h"
#include "api/policy.h"
#include "judging/memlock_held.h"

// The operator's judgement of one GPUTopologyReport (docs/operator.md "Conditions"):
// what the report says, held against the TopologyPolicies that select its Node,
// in conditions an admin reads with `kubectl describe gtr <node>`.
namespace podshaper {

// Condition types, in the order `kubectl describe` lists them.
namespace conditions {
inline constexpr const char* kValidated = "Validated";
inline constexpr const char* kP2PComplete = "P2PComplete";
inline constexpr const char* kMemlockUnlimited = "MemlockUnlimited";
inline constexpr const char* kGPUCountMatchesNode = "GPUCountMatchesNode";
inline constexpr const char* kFresh = "Fresh";
// Only on nodes whose GPUs are in a multi-node NVLink domain (docs/operator.md "Multi-node NVLink").
inline constexpr const char* kNVLinkDomain = "NVLinkDomain";
}  // namespace conditions

struct Condition {
  std::string type;
  std::string status;  // "True", "False" or "Unknown"
  std::string reason;  // CamelCase
  std::string message;  // plain words
};

struct Verdict {
  bool validated = false;
  long long gpus = 0;
  std::string interconnect;  // nvlink, pcie, mixed, none (fewer than two GPUs)
  std::string p2p;           // all, partial, none, unknown (not measured)
  // podshaper.io/memlock: unlimited, the limit in bytes ("4194304"), not-granted
  // (the runtime could not start the agent's memlock-probe), not-applied (it starts
  // containers without the memlock asked); unknown when the report cannot be read.
  std::string memlock;
  std::vector<std::string> policies;
  // podshaper.io/nvlink-domain: the node's multi-node NVLink domain, "<clusterUUID>.<cliqueId>";
  // none without one, or while its GPUs are not all in the same one.
  std::optional<std::string> nvlinkDomain;
  // Validated, P2PComplete, MemlockUnlimited, GPUCountMatchesNode, Fresh, and NVLinkDomain on
  // nodes whose GPUs are in a multi-node NVLink domain
  std::vector<Condition> conditions;
  std::optional<long long> staleAt;   // seconds since the epoch when Fresh turns False; judge again then
  std::optional<std::string> taintEffect;  // the Node should carry the taint (Validated False and a policy asks)

  const Condition* condition(const std::string& type) const;
};

// spec: the report's spec; node: null when no Node of that name exists; now: seconds since the epoch;
// held: the containers podshaper-shm holds back on this node because it did not apply their
// memlock (memlockHeldOn), in the order they are named.
Verdict judge(const nlohmann::json& spec, const Node* node, const std::vector<Policy>& policies, long long now,
              const std::vector<MemlockHeld>& held = {});

// The labels the webhook places pods by, as the Node should carry them.
std::map<std::string, std::string> nodeLabels(const Verdict& verdict);

// Every label nodeLabels may write: those it leaves out of a verdict are removed from the Node.
inline constexpr std::string_view kNodeLabelKeys[] = {names::kTopologyValidated, names::kGpuCount,
                                                      names::kInterconnect,      names::kP2P,
                                                      names::kMemlock,           names::kNvlinkDomain};

}  // namespace podshaper
