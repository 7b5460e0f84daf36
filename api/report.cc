#include "api/report.h"

#include "api/names.h"
#include "base/json_util.h"
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

ReportWrite planReportWrite(const std::optional<nlohmann::json>& existing, const nlohmann::json& spec, long long now,
                            long long heartbeatSeconds) {
  ReportWrite write;
  if (!existing) {
    write.kind = ReportWrite::Kind::kCreate;
    return write;
  }
  const nlohmann::json& current = member(*existing, "spec");
  if (sameMeasurement(current, spec)) {
    if (!heartbeatDue(current, now, heartbeatSeconds)) return write;
    write.kind = ReportWrite::Kind::kHeartbeat;
  } else {
    write.kind = ReportWrite::Kind::kUpdate;
  }
  write.replacement = *existing;
  write.replacement["spec"] = spec;
  return write;
}

const char* reportWriteWord(ReportWrite::Kind kind) {
  switch (kind) {
    case ReportWrite::Kind::kCreate: return "created";
    case ReportWrite::Kind::kUpdate: return "updated";
    case ReportWrite::Kind::kHeartbeat: return "heartbeat";
    case ReportWrite::Kind::kUnchanged: return "unchanged";
  }
  return "unchanged";
}

}  // namespace podshaper
