#include "api/dra.h"

#include <optional>

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

}  // namespace

Result<std::vector<GpuRequest>> gpuRequests(const json& claimSpec, std::string_view deviceClass) {
  std::vector<GpuRequest> out;
  if (!claimSpec.is_object() || !claimSpec.contains("devices") || !claimSpec["devices"].is_object()) return out;
  const json& requests = claimSpec["devices"].value("requests", json::array());
  if (!requests.is_array()) return makeError("spec.devices.requests: expected a list");
  for (const json& request : requests) {
    const std::string name = stringMember(request, "name");
    if (request.is_object() && request.contains("exactly")) {
      auto gpus = exactGpus(request["exactly"], deviceClass, name);
      if (!gpus) return gpus.error();
      if (*gpus) out.push_back(**gpus);
    } else if (request.is_object() && request.contains("firstAvailable") && request["firstAvailable"].is_array() &&
               !request["firstAvailable"].empty()) {
      // The scheduler takes the first subrequest it can satisfy; podshaper shapes for the
      // first, the one asked for when the cluster has room.
      const json& first = request["firstAvailable"][0];
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

}  // namespace podshaper
