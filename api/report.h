#pragma once

#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "api/topology.h"

namespace podshaper {

// The GPUTopologyReport spec: the topology plus observedAt, the heartbeat (RFC 3339).
nlohmann::json reportSpec(const Topology& topology, const std::string& observedAt);

// A new GPUTopologyReport named after its Node and owned by it, so that deleting
// the Node garbage-collects the report.
nlohmann::json newReport(const std::string& nodeName, const std::string& nodeUid, const nlohmann::json& spec);

// True when the report's observedAt is older than `heartbeatSeconds` at `now`
// (seconds since the epoch), or missing or unreadable.
bool heartbeatDue(const nlohmann::json& spec, long long now, long long heartbeatSeconds);

// True when two specs say the same about the node, whatever their observedAt.
bool sameMeasurement(const nlohmann::json& a, const nlohmann::json& b);

// What the agent writes for its node's report, decided from the report as read
// (unset: there is none) and the spec just measured, at `now` (seconds since the epoch).
struct ReportWrite {
  enum class Kind {
    kCreate,     // no report yet: newReport with the Node's uid
    kUpdate,     // the measurement changed
    kHeartbeat,  // the same measurement, its observedAt older than the heartbeat
    kUnchanged,  // nothing to write
  };
  Kind kind = Kind::kUnchanged;
  // kUpdate and kHeartbeat: the whole object read with the new spec, to put back with the
  // resourceVersion read (a concurrent writer makes it a 409). Not a merge patch: that
  // would drop the spec's nulls ("unknown"), and the next compare would see a change.
  nlohmann::json replacement;
};
// The heartbeat is judged from the stored observedAt, so that a restarted agent does not
// write just because it restarted.
ReportWrite planReportWrite(const std::optional<nlohmann::json>& existing, const nlohmann::json& spec, long long now,
                            long long heartbeatSeconds);
// "created", "updated", "heartbeat", "unchanged": the agent's log and its probes_total{result}.
const char* reportWriteWord(ReportWrite::Kind kind);

}  // namespace podshaper
