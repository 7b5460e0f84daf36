#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "shaping/admission_context.h"
#include "shaping/config.h"

namespace podshaper {

// Why a pod was denied, in a word: the step of shape() that refused it (the metric
// podshaper_admission_denials_total{cause}; docs/webhook.md "Metrics").
inline constexpr const char* kDenialCauses[] = {"not-a-pod", "limits",    "claims",      "input",
                                                "node-size", "pod-security", "shm-size", "shm-cap",
                                                "volume-name", "container", "placement", "unreadable"};

struct ShapeOutcome {
  bool allowed = true;
  std::string message;  // why, when denied
  std::string cause;    // when denied: one of kDenialCauses
  nlohmann::json pod;   // the shaped pod; equal to the input when nothing changes
  std::string patch;    // JSON Patch text from the input to `pod`; empty when nothing changes
  std::vector<std::string> warnings;
};

// docs/design.md "A pod, from submit to shaped": the whole shaping rule as a pure
// function. Never throws; bad input is a denial that names the annotation or setting
// to change.
ShapeOutcome shapePod(const nlohmann::json& pod, const Config& config, const AdmissionContext& context);
// The same, the pod shaped where it lies rather than in a copy (the webhook's own
// review); on a denial `pod` in the outcome is not the input (left out, or partly shaped).
ShapeOutcome shapePod(nlohmann::json&& pod, const Config& config, const AdmissionContext& context);

// Labelled podshaper.io/inject: "true": the pods the API server sends podshaper.
bool optedIn(const nlohmann::json& pod);

}  // namespace podshaper
