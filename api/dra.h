#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "base/result.h"

// GPUs asked through Dynamic Resource Allocation (resource.k8s.io/v1): the device
// requests of a ResourceClaim or ResourceClaimTemplate whose device class is the GPU
// driver's (gpu.nvidia.com for NVIDIA's DRA driver; configurable).
namespace podshaper {

struct GpuRequest {
  std::string name;      // the request's name (containers name it in resources.claims[].request)
  bool all = false;      // allocationMode: All: every matching device of the node
  uint64_t count = 0;    // allocationMode: ExactCount (the default): exactly.count, 1 when unset
  std::string chosen;    // firstAvailable: the subrequest counted (the scheduler's first choice)
};

// The GPU requests of a ResourceClaimSpec (a claim's `spec`, a template's `spec.spec`):
// those whose deviceClassName is `deviceClass`, or whose prioritized list's first choice
// is. Requests for other devices, and those with adminAccess (which watch devices that
// other claims hold), are left out. An error names the request and says what
// is wrong (a count that is not a positive integer, an unknown allocationMode).
Result<std::vector<GpuRequest>> gpuRequests(const nlohmann::json& claimSpec, std::string_view deviceClass);

// Whether a ResourceClaimSpec asks a device of `deviceClass` (a request's `exactly`, or its
// prioritized list's first choice, as GPUs are counted): a ComputeDomain's IMEX channel.
bool requestsDeviceClass(const nlohmann::json& claimSpec, std::string_view deviceClass);

// A ComputeDomain of NVIDIA's DRA driver (apiVersion resource.nvidia.com/..., kind ComputeDomain).
bool isComputeDomain(const nlohmann::json& object);

// The ResourceClaimTemplate the driver's controller makes for a ComputeDomain's IMEX
// channel: named by its spec.channel.resourceClaimTemplate.name, in its namespace, with
// one request "channel" of `channelClass`. Users' manifests name that template without
// having it. An error names the field where it is not set: the driver makes no template.
Result<nlohmann::json> channelTemplateOf(const nlohmann::json& computeDomain, std::string_view channelClass);

// `claims` (ResourceClaims and ResourceClaimTemplates) and the channel template of each
// of `computeDomains`, where `claims` has no template of that namespace and name (the one
// given is the cluster's, or the user's own: it is read). `warnings` name each
// ComputeDomain not read, and why.
std::vector<nlohmann::json> withChannelTemplates(std::vector<nlohmann::json> claims,
                                                 const std::vector<nlohmann::json>& computeDomains,
                                                 std::string_view channelClass, std::vector<std::string>& warnings);

}  // namespace podshaper
