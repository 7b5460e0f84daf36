#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "api/dra.h"
#include "base/result.h"

// GPUs a pod gets through Dynamic Resource Allocation: its spec.resourceClaims name
// ResourceClaimTemplates or ResourceClaims of its namespace, and each container uses
// some of them in resources.claims. docs/webhook.md "GPUs through DRA".
namespace podshaper {

enum class ClaimKind { kTemplate, kClaim };
std::string_view kindName(ClaimKind kind);  // ResourceClaimTemplate, ResourceClaim

// One entry of the pod's spec.resourceClaims.
struct ClaimRef {
  std::string podClaim;  // the entry's name, which containers use
  ClaimKind kind = ClaimKind::kTemplate;
  std::string name;      // the ResourceClaimTemplate's or ResourceClaim's name
};

// The pod's spec.resourceClaims. An entry that names neither a template nor a claim,
// or both, is an error.
Result<std::vector<ClaimRef>> claimRefs(const nlohmann::json& pod);

// The claim spec (a ResourceClaim's spec, a ResourceClaimTemplate's spec.spec) of the
// object `ref` names in namespace `ns`; nullopt when there is no such object; an error
// when it could not be read.
using ClaimLookup =
    std::function<Result<std::optional<nlohmann::json>>(std::string_view ns, const ClaimRef& ref)>;

// The claim spec of a whole ResourceClaim or ResourceClaimTemplate object.
nlohmann::json claimSpecOf(const nlohmann::json& object);

// A lookup over ResourceClaim and ResourceClaimTemplate objects (each with kind,
// metadata.namespace and metadata.name), as `kubectl get -o json` lists them.
ClaimLookup claimLookupOver(const std::vector<nlohmann::json>& objects);

// The GPUs of the pod's claims, by the pod's claim name.
struct PodClaimGpus {
  std::map<std::string, std::vector<GpuRequest>> byPodClaim;
  // The pod's claims (their names in spec.resourceClaims) that ask a ComputeDomain's IMEX
  // channel: devices that are not GPUs, kept apart from them.
  std::set<std::string> channelClaims;
  // False where the claims were not read (no lookup): whether the pod claims a channel is unknown.
  bool read = true;
  std::vector<std::string> warnings;
};

// Reads every claim the pod names through `lookup`, keeping the requests of device
// class `deviceClass`, and which claims ask a device of `channelClass` (none when empty). An empty lookup (the webhook does not watch the cluster): nothing is
// read and a warning says so. An error names the claim: one that does not exist, or a
// request podshaper cannot count.
Result<PodClaimGpus> readPodClaimGpus(const nlohmann::json& pod, std::string_view ns, std::string_view deviceClass,
                                      const ClaimLookup& lookup, std::string_view channelClass = {});

// What one container gets of its pod's claim GPUs (its resources.claims). A request is
// counted for the first container that uses it; `taken` holds the requests earlier
// containers counted ("podClaim/request") and gains this container's.
struct ContainerClaimGpus {
  uint64_t count = 0;   // the exact counts of the requests it counts
  bool all = false;     // it counts a request of allocationMode All (every GPU of the node)
  bool counted = false; // it counts at least one GPU request
  std::vector<std::string> shared;  // GPU requests it uses that an earlier container counted
};
Result<ContainerClaimGpus> containerClaimGpus(const nlohmann::json& container, const PodClaimGpus& claims,
                                              std::set<std::string>& taken);

}  // namespace podshaper
