#include "api/report.h"

#include "api/names.h"
#include "base/timefmt.h"

namespace podshaper {

nlohmann::json reportSpec(const Topology& topology, const std::string& observedAt) {
  nlohmann::json spec = toJson(topology);
  spec["observedAt"] = observedAt;
  return spec;
}

nlohmann::json newReport(const std::string& nodeName, const std::string& nodeUid, const nlohmann::json& spec) {
  return {{"apiVersion", names::kGroupVersion},
          {"kind", names::kReportKind},
          {"metadata",
           {{"name", nodeName},
            {"ownerReferences",
             nlohmann::json::array({{{"apiVersion", "v1"}, {"kind", "Node"}, {"name", nodeName}, {"uid", nodeUid}}})}}},
          {"spec", spec}};
}

bool heartbeatDue(const nlohmann::json& spec, long long now, long long heartbeatSeconds) {
  if (!spec.is_object() || !spec.contains("observedAt") || !spec["observedAt"].is_string()) return true;
  auto observed = parseTime(spec["observedAt"].get<std::string>());
  return !observed || now - *observed >= heartbeatSeconds;
}

bool sameMeasurement(const nlohmann::json& a, const nlohmann::json& b) {
  if (!a.is_object() || !b.is_object()) return a == b;
  nlohmann::json x = a, y = b;
  x.erase("observedAt");
  y.erase("observedAt");
  return x == y;
}

}  // namespace podshaper
