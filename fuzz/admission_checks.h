#pragma once

// The admission invariants, shared by the admission and annotations targets.

#include <string_view>
#include <vector>

#include "shaping/cluster_view.h"
#include "shaping/config.h"

namespace podshaper::fuzz {

// A cluster the placement path can choose from: validated 8-GPU nodes with and
// without P2P between all pairs, a validated 4-GPU node, namespaces that opt
// out or enforce Pod Security levels. `validated` false: the operator is not
// installed (no podshaper labels), so nodes are placed by allocatable GPUs.
ClusterView fuzzCluster(bool validated);

// Every (config, cluster) pair an input is admitted under.
struct Setting {
  Config config;
  const ClusterView* cluster;
};
const std::vector<Setting>& fuzzSettings();

// Admits `body` and checks what every answer must satisfy; aborts when one does not:
// - CPU bounded: admitting costs at most 40 parses of the body (+100 ms), and the
//   response is at most 8 times the body (+64 KiB);
// - an Error only for a body that is not an AdmissionReview, with a message;
// - the response is an AdmissionReview v1 with the request's uid, dumps as JSON,
//   and its warnings are strings that say "podshaper: ";
// - a denial carries a message and no patch, and no library's exception text;
// - a patch is base64 of a non-empty RFC 6902 JSON Patch that applies to the pod
//   and gives exactly the pod shapePod() returns, with a /dev/shm of at least 1Mi;
// - an NRI ulimit annotation it writes or extends is a YAML list with the
//   memlock the config asks and the user's entries kept;
// - admitting the patched pod again is allowed with no patch (README "What the webhook does":
//   idempotent).
void checkAdmission(std::string_view body, const Config& config, const ClusterView* cluster);

}  // namespace podshaper::fuzz
