#include "shaping/workload.h"

#include <set>
#include <string>

#include "api/pod_templates.h"
#include "base/json_util.h"

namespace podshaper {
namespace {

using json = nlohmann::json;

// The controller reference the pods of `object` carry where `object` makes them itself (a
// Job, not a Deployment, whose ReplicaSet does): the workload they are known by (their
// ShmProfile, their NVLink group). Null for other kinds, and for an object with no name yet.
json controllerRefOf(const json& object) {
  static const std::set<std::string, std::less<>> kMakesItsPods = {
      "batch/v1/Job", "apps/v1/StatefulSet", "apps/v1/ReplicaSet", "apps/v1/DaemonSet", "v1/ReplicationController"};
  const std::string name = stringMember(member(object, "metadata"), "name");
  const std::string apiVersion = stringMember(object, "apiVersion");
  if (name.empty() || !kMakesItsPods.contains(apiVersion + "/" + stringMember(object, "kind"))) return nullptr;
  return {{"apiVersion", apiVersion}, {"kind", object["kind"]}, {"name", name}, {"controller", true}};
}

// The pod a controller makes from `podTemplate`: its metadata and spec, in the namespace,
// owned by `controllerRef` where it is not null.
json podFrom(const json& podTemplate, const std::string& namespaceName, const json& controllerRef) {
  json pod = {{"apiVersion", "v1"}, {"kind", "Pod"}};
  json metadata = member(podTemplate, "metadata").is_object() ? member(podTemplate, "metadata") : json::object();
  if (!metadata.contains("namespace")) metadata["namespace"] = namespaceName;
  if (!controllerRef.is_null() && !metadata.contains("ownerReferences")) metadata["ownerReferences"] = json::array({controllerRef});
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
    json pod = isPod ? podTemplate : podFrom(podTemplate, context.namespaceName, controllerRefOf(object));
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
        // The controller writes its reference, not the template.
        if (!member(podTemplate, "metadata").contains("ownerReferences")) metadata.erase("ownerReferences");
        shaped["metadata"] = std::move(metadata);
        shaped["spec"] = std::move(outcome.pod["spec"]);
      }
    }
    review.templates.push_back(std::move(t));
  }
  return review;
}

}  // namespace podshaper
