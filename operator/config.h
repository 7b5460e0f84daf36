#pragma once

#include <chrono>
#include <string>
#include <vector>

#include "api/shm_profile.h"
#include "base/result.h"

namespace podshaper::op {

// podshaper-operator's --config file (YAML). Unknown keys are errors.
//
//   listen: ":8443"                  # /healthz, /readyz, /metrics (HTTPS)
//   tlsCertFile: ""                  # empty: a self-signed certificate made at start
//   tlsKeyFile: ""
//   eventNamespace: default          # where Events about cluster-scoped objects go
//   workers: 2
//   pendingGrace: 30s                # a shaped pod unscheduled this long gets a NotPlaceable Event
//   leaderElection:
//     enabled: true
//     namespace: podshaper-system
//     name: podshaper-operator
//     leaseDuration: 15s
//     renewDeadline: 10s
//     retryPeriod: 2s
//   webhookCertificate:
//     mode: external                 # operator: made and rotated here; external: cert-manager or yours
//     namespace: podshaper-system    # the Secret's
//     secretName: podshaper-webhook-tls
//     webhookConfiguration: podshaper
//     service: podshaper-webhook     # SANs <service>.<namespace>.svc[.cluster.local]
//     dnsNames: []                   # more SANs
//     ipAddresses: []
//     caValidity: 87600h
//     validity: 2160h
//     renewBefore: 720h
//     checkInterval: 1m
//   shmProfiles:                     # docs/operator.md "ShmProfiles: sizing from measured use"
//     runsKept: 10                   # the last runs a workload's profile keeps (1..100)
//     maxAge: 336h                   # a run older than this is dropped (at least 1h)
//     headroomPercent: 20            # above the highest need per rank (0..1000)
struct WebhookCertificateConfig {
  bool managed = false;  // mode: operator
  std::string ns = "podshaper-system";
  std::string secretName = "podshaper-webhook-tls";
  std::string webhookConfiguration = "podshaper";
  std::string service = "podshaper-webhook";
  std::vector<std::string> dnsNames, ipAddresses;
  std::chrono::seconds caValidity{87600LL * 3600}, validity{2160LL * 3600}, renewBefore{720LL * 3600};
  std::chrono::seconds checkInterval{60};

  // The serving certificate's SANs: the Service's names, then dnsNames and ipAddresses.
  std::vector<std::string> sans() const;
};

struct OperatorConfig {
  std::string listen = ":8443";
  std::string tlsCertFile, tlsKeyFile;
  std::string eventNamespace = "default";
  int workers = 2;
  std::chrono::seconds pendingGrace{30};
  bool leaderElection = true;
  std::string leaseNamespace = "podshaper-system";
  std::string leaseName = "podshaper-operator";
  std::chrono::seconds leaseDuration{15}, renewDeadline{10}, retryPeriod{2};
  WebhookCertificateConfig webhookCertificate;
  ProfileSettings shmProfiles;
};

// The error names the key: "leaderElection.leaseDuration: \"15\": expected a duration such as 15s".
Result<OperatorConfig> parseOperatorConfig(const std::string& yaml);

}  // namespace podshaper::op
