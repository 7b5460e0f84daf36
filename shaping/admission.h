#pragma once

#include <string_view>

#include <nlohmann/json.hpp>

#include "base/result.h"
#include "shaping/cluster_view.h"
#include "shaping/config.h"
#include "shaping/pod_claims.h"

namespace podshaper {

struct AdmissionDecision {
  nlohmann::json review;  // the AdmissionReview v1 with .response
  bool allowed = true;
  bool mutated = false;   // a non-empty patch was returned
  // For the logs: the pod ("ml/train-0"; "ml/train-*" while only generateName is set) and
  // its controller ("Job train"), when the review is a pod's CREATE.
  std::string object;
  std::string owner;
  std::string cause;  // when denied: one of kDenialCauses (shaping/pod_shaper.h)

  // review.dump(), the bytes the webhook answers, written faster (base/json_write.h; the
  // patch's base64 needs no escaping at all).
  std::string body() const;
};

// The webhook's handler as a pure function: AdmissionReview v1 in, AdmissionReview
// out. Pod CREATEs are shaped; any other well-formed review is allowed unchanged.
// An Error means the body is not an AdmissionReview (HTTP 400, exit 2 in review).
// `claims` reads the resource claims pods name (empty: not read; see AdmissionContext).
Result<AdmissionDecision> admit(std::string_view body, const Config& config, const ClusterView* cluster,
                                std::string_view shaperVersion, const ClaimLookup& claims = {});

}  // namespace podshaper
