#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "shaping/config.h"
#include "shaping/pod_shaper.h"

// A workload as `review -f` reads it: what podshaper does to the pods it will make.
namespace podshaper {

struct TemplateReview {
  std::string where;       // "" for a Pod, else the template's path ("spec.template")
  nlohmann::json::json_pointer pointer;  // the template in the object
  bool called = true;      // false: not labelled podshaper.io/inject=true, so the API server never calls podshaper
  bool allowed = true;
  std::string message;     // why, when denied
  DenialCause cause = DenialCause::kNone;
  std::vector<std::string> warnings;
};

struct WorkloadReview {
  nlohmann::json object;   // the workload, each template as the pod made from it would be shaped
  std::vector<TemplateReview> templates;
  bool denied() const;
};

// Each pod template of `object` (a Pod, a Job, a Deployment, a JobSet, any kind with
// PodTemplateSpecs: api/pod_templates.h) shaped as the pod a controller makes from it is
// shaped at its creation, in context.namespaceName. A template the webhook is not called
// for (its labels lack podshaper.io/inject: "true") is left as it is. A denied template is
// left as it is, with the denial's message.
WorkloadReview reviewWorkload(const nlohmann::json& object, const Config& config, const AdmissionContext& context);

}  // namespace podshaper
