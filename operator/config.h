#pragma once

#include <chrono>
#include <string>

#include "core/result.h"

namespace podshaper::op {

// podshaper-operator's --config file (YAML). Unknown keys are errors.
//
//   listen: ":8443"                  # /healthz, /readyz, /metrics (HTTPS)
//   tlsCertFile: ""                  # empty: a self-signed certificate made at start
//   tlsKeyFile: ""
//   eventNamespace: default          # where Events about cluster-scoped objects go
//   workers: 2
//   leaderElection:
//     enabled: true
//     namespace: podshaper-system
//     name: podshaper-operator
//     leaseDuration: 15s
//     renewDeadline: 10s
//     retryPeriod: 2s
struct OperatorConfig {
  std::string listen = ":8443";
  std::string tlsCertFile, tlsKeyFile;
  std::string eventNamespace = "default";
  int workers = 2;
  bool leaderElection = true;
  std::string leaseNamespace = "podshaper-system";
  std::string leaseName = "podshaper-operator";
  std::chrono::seconds leaseDuration{15}, renewDeadline{10}, retryPeriod{2};
};

// The error names the key: "leaderElection.leaseDuration: \"15\": expected a duration such as 15s".
Result<OperatorConfig> parseOperatorConfig(const std::string& yaml);

}  // namespace podshaper::op
