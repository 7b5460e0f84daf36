#include "api/dra.h"

#include <optional>
#include <set>

#include "base/json_util.h"

namespace podshaper {
namespace {

using nlohmann::json;

// One exact request (a request's `exactly`, or one subrequest of `firstAvailable`), when
// it is for `deviceClass`; nothing when it is for another class.
Result<std::optional<GpuRequest>> exactGpus(const json& exact, std::string_view deviceClass, const std::string& name) {
  if (stringMember(exact, "deviceClassName") != deviceClass) return std::optional<GpuRequest>();
  // Admin access (monitoring) sees devices that other claims hold: it gives the pod none.
  if (member(exact, "adminAccess") == true) return std::optional<GpuRequest>();
  GpuRequest r;
  r.name = name;
  const std::string mode = stringMember(exact, "allocationMode");
  if (mode == "All") {
    r.all = true;
    return std::optional<GpuRequest>(r);
  }
  if (!mode.empty() && mode != "ExactCount") {
    return makeError("device request \"" + name + "\": allocationMode \"" + mode + "\" is neither ExactCount nor All");
  }
  r.count = 1;
  if (exact.contains("count")) {
    const json& count = exact["count"];
    if (!count.is_number_integer() || count.get<int64_t>() < 1) {
      return makeError("device request \"" + name + "\": count " + count.dump() + " is not a positive integer");
    }
    r.count = static_cast<uint64_t>(count.get<int64_t>());
  }
  return std::optional<GpuRequest>(r);
}

// The request's exact ask: its `exactly`, or its prioritized list's first choice (the
// scheduler takes the first subrequest it can satisfy; podshaper shapes for the first, the
// one asked for when the cluster has room); null for neither.
const json* exactOf(const json& request) {
  if (!request.is_object()) return nullptr;
  if (request.contains("exactly")) return &request["exactly"];
  const json& list = member(request, "firstAvailable");
  return list.is_array() && !list.empty() ? &list[0] : nullptr;
}

// The claim spec's device requests; null where it has none.
Result<const json*> requestsOf(const json& claimSpec) {
  if (!claimSpec.is_object() || !claimSpec.contains("devices") || !claimSpec["devices"].is_object()) {
    return static_cast<const json*>(nullptr);
  }
  const json& devices = claimSpec["devices"];
  if (!devices.contains("requests")) return static_cast<const json*>(nullptr);
  if (!devices["requests"].is_array()) return makeError("spec.devices.requests: expected a list");
  return &devices["requests"];
}

}  // namespace

bool requestsDeviceClass(const json& claimSpec, std::string_view deviceClass) {
  auto requests = requestsOf(claimSpec);
  if (!requests || *requests == nullptr) return false;
  for (const json& request : **requests) {
    const json* exact = exactOf(request);
    if (exact != nullptr && stringMember(*exact, "deviceClassName") == deviceClass) return true;
  }
  return false;
}

Result<std::vector<GpuRequest>> gpuRequests(const json& claimSpec, std::string_view deviceClass) {
  std::vector<GpuRequest> out;
  auto requests = requestsOf(claimSpec);
  if (!requests) return requests.error();
  if (*requests == nullptr) return out;
  for (const json& request : **requests) {
    const std::string name = stringMember(request, "name");
    if (request.is_object() && request.contains("exactly")) {
      auto gpus = exactGpus(request["exactly"], deviceClass, name);
      if (!gpus) return gpus.error();
      if (*gpus) out.push_back(**gpus);
    } else if (const json* exact = exactOf(request)) {
      const json& first = *exact;
      auto gpus = exactGpus(first, deviceClass, name);
      if (!gpus) return gpus.error();
      if (*gpus) {
        (*gpus)->chosen = stringMember(first, "name");
        out.push_back(**gpus);
      }
    }
  }
  return out;
}

bool isComputeDomain(const json& object) {
  return stringMember(object, "kind") == "ComputeDomain" &&
         stringMember(object, "apiVersion").starts_with("resource.nvidia.com/");
}

Result<json> channelTemplateOf(const json& computeDomain, std::string_view channelClass) {
  const std::string name =
      stringMember(member(member(member(computeDomain, "spec"), "channel"), "resourceClaimTemplate"), "name");
  if (name.empty()) {
    return makeError("spec.channel.resourceClaimTemplate.name is not set: NVIDIA's DRA driver makes the IMEX "
                     "channel's ResourceClaimTemplate by that name, which pods name in "
                     "spec.resourceClaims[].resourceClaimTemplateName; set it");
  }
  return json{{"apiVersion", "resource.k8s.io/v1"},
              {"kind", "ResourceClaimTemplate"},
              {"metadata", {{"name", name}, {"namespace", stringMember(member(computeDomain, "metadata"), "namespace")}}},
              {"spec",
               {{"spec",
                 {{"devices",
                   {{"requests", json::array({{{"name", "channel"},
                                               {"exactly", {{"deviceClassName", std::string(channelClass)}}}}})}}}}}}}};
}

std::vector<json> withChannelTemplates(std::vector<json> claims, const std::vector<json>& computeDomains,
                                       std::string_view channelClass, std::vector<std::string>& warnings) {
  auto key = [](const json& object) {
    const json& metadata = member(object, "metadata");
    return stringMember(metadata, "namespace") + "/" + stringMember(metadata, "name");
  };
  std::set<std::string> templates;  // "namespace/name"
  for (const json& c : claims) {
    if (stringMember(c, "kind") == "ResourceClaimTemplate") templates.insert(key(c));
  }
  for (const json& domain : computeDomains) {
    auto made = channelTemplateOf(domain, channelClass);
    if (!made) {
      warnings.push_back("ComputeDomain " + key(domain) + ": not read as its channel's ResourceClaimTemplate: " +
                         made.error().message);
      continue;
    }
    // Two ComputeDomains naming one template make the same one here: the first is kept.
    if (templates.insert(key(*made)).second) claims.push_back(std::move(*made));
  }
  return claims;
}

}  // namespace podshaper
