#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

// Where a workload keeps the pods it will make: a Pod is its own; a Deployment, Job,
// StatefulSet, DaemonSet or ReplicaSet has spec.template, a CronJob
// spec.jobTemplate.spec.template, a JobSet one per replicated job, a PyTorchJob one per
// replica type, a RayCluster one per group. Any kind is read the same way: every
// PodTemplateSpec in it, an object whose `spec` has a `containers` list.
namespace podshaper {

struct PodTemplateAt {
  nlohmann::json::json_pointer pointer;  // to the template ("" for a Pod itself)
  std::string where;                     // as a user writes it: "spec.replicatedJobs[0].template.spec.template"
};

// The pod templates of `object`, in document order; a Pod (kind: Pod) is its one template
// at "". Templates inside a template are not looked for; nesting past 32 levels is not read.
std::vector<PodTemplateAt> podTemplates(const nlohmann::json& object);

}  // namespace podshaper
