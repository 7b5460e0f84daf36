#pragma once

// A pod whose nodes are in multi-node NVLink domains (GB200/GB300 NVL72 racks; the node
// label podshaper.io/nvlink-domain): its job kept in one domain, the IMEX channel NCCL
// needs there checked, and whether its ranks stay within a domain for the NCCL reserve
// (docs/webhook.md "Multi-node NVLink").
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "base/json_edit.h"
#include "base/result.h"
#include "shaping/config.h"
#include "shaping/denial.h"
#include "shaping/node_class.h"
#include "shaping/pod_claims.h"
#include "shaping/pod_inputs.h"

namespace podshaper {

struct NvlinkPlan {
  // The pod's podshaper.io/nvlink-group, which a podAffinity on podshaper.io/nvlink-domain
  // keeps in one domain; none: no term (not node-exclusive, one node, no workload, a job
  // larger than every domain).
  std::optional<std::string> group;
  bool required = false;  // the term is required (config mnnvl.placement), else preferred
  // The domain the job's ranks are all kept within, in words, for the NCCL reserve
  // (NcclReserveInputs::nvlinkDomain); empty where they may leave it.
  std::string keptWithin;
  std::vector<std::string> warnings;
};

// Nothing for a pod whose nodes are not all in NVLink domains. Denied (config
// mnnvl.missingChannel: deny): a pod whose ranks may span nodes, with NCCL's MNNVL left on,
// whose GPU containers do not use a claim of the ComputeDomain channel class.
Result<NvlinkPlan, Denial> planNvlink(const nlohmann::json& pod, const PodInputs& in, const NodeClass& nodeClass,
                                      const PodClaimGpus& claims, const MnnvlSettings& settings);

// The group label and the podAffinity term of `plan`, where it has a group.
void keepInNvlinkDomain(JsonEdit& edit, const NvlinkPlan& plan);

}  // namespace podshaper
