#pragma once

// /dev/shm from what the workload's earlier runs used (docs/webhook.md "Sizing from
// measured use"): the pod's workload, its ShmProfile as the webhook's watch keeps it, and
// what that does to the formula's plan, by the pod's podshaper.io/shm-sizing or config
// shm.sizing.

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "api/shm_profile.h"
#include "base/result.h"
#include "shaping/admission_context.h"
#include "shaping/config.h"
#include "shaping/shm.h"

namespace podshaper {

// The profile that sizes the pod, and how.
struct MeasuredShm {
  std::string profile;  // its name
  Recommendation recommendation;
  ShmSizing sizing = ShmSizing::kMeasured;  // kMeasured or kRecommend
  int64_t now = 0;                          // for "the last 2 h ago"; 0: its time instead
};

struct PodProfile {
  std::optional<ProfiledPod> profiled;  // the pod's workload: written on it for the operator
  std::optional<MeasuredShm> measured;  // its profile, where one applies
  std::vector<std::string> warnings;    // a profile that does not apply, and why
};

// The pod's workload and the profile that sizes it. Denied (an Error): a
// podshaper.io/workload or podshaper.io/shm-sizing that does not read.
Result<PodProfile> podProfile(const nlohmann::json& pod, uint64_t ranks, const ShmSettings& settings,
                              const AdmissionContext& context);

// The plan with the profile applied: kMeasured takes the profile's size (never below
// NCCL's reserve nor 64Mi) and says the formula's beside it; kRecommend keeps the
// formula's and returns the profile's as a warning.
std::vector<std::string> applyMeasured(ShmPlan& plan, const MeasuredShm& measured, uint64_t ranks);

}  // namespace podshaper
