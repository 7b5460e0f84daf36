#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "cli/flags.h"
#include "shaping/admission_context.h"
#include "shaping/config.h"
#include "shaping/pod_claims.h"

namespace podshaper::webhook {

// `podshaper-webhook review -f FILE|DIR|- [-n NAMESPACE] [--config FILE] [--cluster FILE] [-o yaml|json|diff]`:
// Pods and workloads (YAML or JSON) in, each shaped as its pods would be; exit 1 on a denial.
// `podshaper-webhook review [--config FILE] [--cluster FILE] [-o review|pod] < admissionreview.json`:
// the AdmissionReview form. --cluster: `kubectl get namespaces,nodes -o json` (and the
// claims and ShmProfiles of the namespaces reviewed), to decide as serve would on that cluster.
int runReview(int argc, char** argv);

// What review knows of a cluster: from --cluster, and from the objects of -f's input.
struct ClusterObjects {
  std::vector<nlohmann::json> namespaces, nodes, claims, shmProfiles, computeDomains;
  // Takes `object` when it is a Namespace, a Node, a ResourceClaim or ResourceClaimTemplate,
  // a ComputeDomain (read as the channel template its driver makes), a ShmProfile, or a
  // DeviceClass (read and not used: podshaper knows GPUs by config gpuDeviceClass).
  bool take(const nlohmann::json& object);
  // The claims and templates pods are reviewed with: those given, and each ComputeDomain's
  // channel template that none given stands for; a ComputeDomain not read is warned of on stderr.
  ClaimLookup claimLookup(const Config& config) const;
};

// The ShmProfile of that namespace and name among `profiles`, whole (the last of them where
// two have one name: -f's input comes after --cluster's), as AdmissionContext::shmProfiles
// asks; a profile without a name is never found.
ShmProfileLookup shmProfileLookupOver(const std::vector<nlohmann::json>& profiles);

// Seconds since the epoch: review decides at the time it runs, as serve at each admission's
// (a profile's runs too old are left out, and the formula says how long ago the last ended).
int64_t nowSeconds();

// A list's item with its kind: the API server leaves an item's kind out of a NodeList; the
// list's kind says it.
nlohmann::json itemWithKind(const nlohmann::json& item, const nlohmann::json& list);

// -f: the objects of FILE, every .yaml, .yml and .json of DIR, or stdin; exit 0 when each
// pod would be shaped or left alone, 1 when one would be denied, 2 on input it cannot read.
int reviewFiles(const cli::Flags& flags, const Config& config, ClusterObjects cluster, bool clusterGiven);

// The exit code and message of input review cannot use.
int reviewFailed(const std::string& message);

}  // namespace podshaper::webhook
