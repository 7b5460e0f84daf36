#pragma once

#include <string_view>

#include <nlohmann/json.hpp>

#include "base/json_parse.h"
#include "base/result.h"
#include "shaping/admission_context.h"
#include "shaping/cluster_view.h"
#include "shaping/config.h"
#include "shaping/denial.h"
#include "shaping/node_requirements_text.h"
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
  DenialCause cause = DenialCause::kNone;

  // review.dump(), the bytes the webhook answers, written faster (base/json_write.h; the
  // patch's base64 needs no escaping at all).
  std::string body() const;
};

// What a webhook thread keeps from one admission to the next, not to make it anew each
// time: the review's tree, read into again by the same reader (JsonReader::into: the
// reviews one thread answers share most of their shape, and most of what a tree costs is
// making and freeing it; the reader keeps simdjson's buffers), the config's hash and the
// node requirements' JSON text. One admission at a time uses it.
struct AdmissionScratch {
  nlohmann::json review;
  JsonReader reader;
  ConfigHashMemo configHash;
  NodeRequirementsText nodeRequirements;
};

// The webhook's handler as a pure function: AdmissionReview v1 in, AdmissionReview
// out. Pod CREATEs are shaped; any other well-formed review is allowed unchanged.
// An Error means the body is not an AdmissionReview (HTTP 400, exit 2 in review).
// `claims` reads the resource claims pods name, `shmProfiles` the workloads' ShmProfiles
// (empty: not read; see AdmissionContext); `now` is seconds since the epoch (0: not said).
Result<AdmissionDecision> admit(AdmissionScratch& scratch, std::string_view body, const Config& config,
                                const ClusterView* cluster, std::string_view shaperVersion,
                                const ClaimLookup& claims = {}, const ShmProfileLookup& shmProfiles = {},
                                int64_t now = 0);
// The same with a scratch of its own: one admission (review, tests).
Result<AdmissionDecision> admit(std::string_view body, const Config& config, const ClusterView* cluster,
                                std::string_view shaperVersion, const ClaimLookup& claims = {},
                                const ShmProfileLookup& shmProfiles = {}, int64_t now = 0);

}  // namespace podshaper
