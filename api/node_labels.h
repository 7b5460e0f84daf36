#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "api/memlock.h"
#include "api/node_requirement.h"

// The contract between the operator, which labels each GPU node with what it judged, and
// the webhook, which requires those labels of the nodes its pods may run on: the labels'
// names and values, how each requirement is written, and the memlock encoding. The
// operator explains a Pending pod with the same requirements (judging/pending.h); a test
// feeds the webhook's output to that explanation (tests/unit/contract).
namespace podshaper::names {

inline constexpr std::string_view kTopologyValidated = "podshaper.io/topology-validated";
inline constexpr std::string_view kGpuCount = "podshaper.io/gpu-count";
inline constexpr std::string_view kInterconnect = "podshaper.io/interconnect";
inline constexpr std::string_view kP2P = "podshaper.io/p2p";
inline constexpr std::string_view kMemlock = "podshaper.io/memlock";
// The node's multi-node NVLink domain, "<clusterUUID>.<cliqueId>" as NVML gives them (the
// value of GPU Feature Discovery's nvidia.com/gpu.clique): absent on a node whose GPUs are
// in no NVLink fabric (docs/agent.md "Multi-node NVLink").
inline constexpr std::string_view kNvlinkDomain = "podshaper.io/nvlink-domain";

// podshaper.io/memlock: unlimited, the granted limit in bytes, not-granted (the
// runtime could not start a container with the memlock asked), not-applied (the runtime
// starts containers without applying the memlock asked: its NRI ulimit-adjuster plugin is
// not running), unknown. The webhook's node affinity admits only unlimited or a number.
inline constexpr std::string_view kMemlockUnlimited = "unlimited";
inline constexpr std::string_view kMemlockNotGranted = "not-granted";
inline constexpr std::string_view kMemlockNotApplied = "not-applied";
// podshaper.io/p2p: every GPU pair of the node has P2P.
inline constexpr std::string_view kP2PAll = "all";

}  // namespace podshaper::names

namespace podshaper {

// A node that carries none of the operator's labels yet, in every message that says so.
inline constexpr std::string_view kNotJudgedWords = "not judged by podshaper";

// What a shaped pod asks of its node.
struct NodeAsk {
  MemlockLimit memlock;                   // the memlock its containers get
  std::optional<uint64_t> exclusiveGpus;  // a node-exclusive pod's node size
  bool p2p = false;                       // P2P between all of the node's GPUs
  bool operator==(const NodeAsk&) const = default;
};

// The node requirements of `ask`, one list per alternative (a nodeSelectorTerm each; a
// node must meet every requirement of one of them): validated, the memlock granted
// (unlimited, or for a number of bytes "Gt bytes-1", as the scheduler has no Ge), the
// node's GPU count, P2P.
std::vector<std::vector<NodeRequirement>> nodeRequirements(const NodeAsk& ask);

// What a node's labels say it is, as the operator wrote them (valueOf: label key ->
// const std::string*, nullptr when absent).
enum class NodeLabelKind { kGpuCount, kValidated, kMemlock, kP2P, kOther };
NodeLabelKind nodeLabelKind(std::string_view key);

// The podshaper.io/gpu-count value for `gpus`, and back: only a label spelled as the
// operator writes it ("8", not "08") reads, as the scheduler matches "In [8]" by text.
std::string gpuCountLabel(uint64_t gpus);
std::optional<uint64_t> gpuCountOf(std::string_view label);

// The podshaper.io/memlock value for what the runtime granted.
std::string memlockLabel(const MemlockLimit& granted);

// The memlock the requirements of a pod's terms accept, for people: "unlimited or at
// least 4Mi" (the Gt bound read back as bytes + 1).
std::string memlockAskedWords(const std::vector<NodeRequirement>& memlockRequirements);

// The podAffinity term that keeps a job's pods in one NVLink domain: the pods of the pod's
// own namespace (no namespaceSelector) labelled podshaper.io/nvlink-group=<group>, topologyKey
// podshaper.io/nvlink-domain. The webhook writes it (shaping/nvlink.h); the operator explains
// a pod that its required form keeps Pending (judging/pending.h).
nlohmann::json nvlinkGroupTerm(const std::string& group);
// The group of the pod's required podAffinity term of that form; nullopt where it has none
// (a term that selects more than the group is not read as one).
std::optional<std::string> requiredNvlinkGroup(const nlohmann::json& podSpec);

}  // namespace podshaper
