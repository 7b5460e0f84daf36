#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "shaping/admission_context.h"
#include "shaping/config.h"
#include "shaping/denial.h"

namespace podshaper {

struct ShapeOutcome {
  bool allowed = true;
  std::string message;  // why, when denied
  DenialCause cause = DenialCause::kNone;
  nlohmann::json pod;   // the shaped pod; equal to the input when nothing changes
  std::string patch;    // JSON Patch text from the input to `pod`; empty when nothing changes
  std::vector<std::string> warnings;  // each "podshaper: ..."
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
