#pragma once

#include <string>

#include <nlohmann/json.hpp>

#include "base/result.h"
#include "kube/client.h"

namespace podshaper::agent {

// Node `node`'s GPUTopologyReport brought to `spec` (observedAt included): a get, then
// what planReportWrite decides at `now`: create (owned by the Node, whose uid is read),
// replace (with the resourceVersion read: a 409 when someone wrote between), or nothing.
// Returns reportWriteWord's word, or what failed ("get: ...", "Node N: ...", "create: ...",
// "update: ...").
Result<std::string> writeReport(const kube::Client& client, const std::string& node, const nlohmann::json& spec,
                                long long now, long long heartbeatSeconds);

// `podshaper-agent run --node NAME [--fixture FILE [--p2p-fixture FILE]] [--kubeconfig FILE]
//  [--interval SECONDS] [--heartbeat SECONDS] [--once]
//  [--memlock-probe-file FILE [--memlock-probe-pod NAMESPACE/NAME] [--memlock-requested unlimited|QUANTITY]
//   [--memlock-probe-wait SECONDS]]`
int runReporter(int argc, char** argv);

}  // namespace podshaper::agent
