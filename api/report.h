#pragma once

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

}  // namespace podshaper
