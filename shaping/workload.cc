#include "shaping/workload.h"

#include "api/pod_templates.h"
#include "base/json_util.h"

namespace podshaper {
namespace {

using json = nlohmann::json;

// The pod a controller makes from `podTemplate`: its metadata and spec, in the namespace.
json podFrom(const json& podTemplate, const std::string& namespaceName) {
  json pod = {{"apiVersion", "v1"}, {"kind", "Pod"}};
  json metadata = member(podTemplate, "metadata").is_object() ? member(podTemplate, "metadata") : json::object();
  if (!metadata.contains("namespace")) metadata["namespace"] = namespaceName;
  pod["metadata"] = std::move(metadata);
  pod["spec"] = member(podTemplate, "spec");
  return pod;
}

}  // namespace

bool WorkloadReview::denied() const {
  for (const auto& t : templates) {
    if (!t.allowed) return true;
  }
  return false;
}

WorkloadReview reviewWorkload(const json& object, const Config& config, const AdmissionContext& context) {
  WorkloadReview review{object, {}};
  for (const auto& at : podTemplates(object)) {
    TemplateReview t;
    t.where = at.where;
    t.pointer = at.pointer;
    const json& podTemplate = object.at(at.pointer);
    if (!optedIn(podTemplate)) {
      t.called = false;
      review.templates.push_back(std::move(t));
      continue;
    }
    bool isPod = at.pointer.empty();
    json pod = isPod ? podTemplate : podFrom(podTemplate, context.namespaceName);
    ShapeOutcome outcome = shapePod(pod, config, context);
    t.allowed = outcome.allowed;
    t.message = outcome.message;
    t.cause = outcome.cause;
    t.warnings = outcome.warnings;
    if (outcome.allowed) {
      if (isPod) {
        review.object = std::move(outcome.pod);
      } else {
        json& shaped = review.object.at(at.pointer);
        json metadata = std::move(outcome.pod["metadata"]);
        if (!member(podTemplate, "metadata").contains("namespace")) metadata.erase("namespace");
        shaped["metadata"] = std::move(metadata);
        shaped["spec"] = std::move(outcome.pod["spec"]);
      }
    }
    review.templates.push_back(std::move(t));
  }
  return review;
}

}  // namespace podshaper
