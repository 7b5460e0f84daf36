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

}  // namespace podshaper
