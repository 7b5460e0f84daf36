#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "shaping/cluster_view.h"
#include "shaping/node_requirements_text.h"
#include "shaping/pod_claims.h"

namespace podshaper {

// The ShmProfile of that name in that namespace (as the webhook's watch keeps it,
// api/shm_profile.h keepShmProfile, or whole), nullopt when there is none.
using ShmProfileLookup = std::function<std::optional<nlohmann::json>(std::string_view ns, std::string_view name)>;

// What the webhook knows of an admission beside the pod: its namespace, the cluster
// and how to read the pod's resource claims.
struct AdmissionContext {
  std::string namespaceName;
  // Null: decide from annotations and config alone (review, or serve without
  // --kubeconfig); P2P is then unknown, and the NCCL reserve counts on its SHM transport.
  const ClusterView* cluster = nullptr;
  // Reads the ResourceClaimTemplates and ResourceClaims the pod names. Empty: they are
  // not read, and GPUs asked through them are not counted (with a warning).
  ClaimLookup claims;
  // Reads the pod's workload's ShmProfile. Empty: none is read, and /dev/shm is sized by
  // the formula.
  ShmProfileLookup shmProfiles;
  // Seconds since the epoch, for "the last run 2 h ago"; 0: not said.
  int64_t now = 0;
  std::string shaperVersion = "podshaper-webhook/dev";
  // The config's hash where the caller keeps it (admit's AdmissionScratch); empty: shapePod hashes the config.
  std::string_view configHash;
  // The node requirements' JSON text the caller keeps (admit's AdmissionScratch); null:
  // shapePod makes them.
  NodeRequirementsText* nodeRequirements = nullptr;
};

}  // namespace podshaper
