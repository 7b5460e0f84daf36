#include "shaping/train_job.h"

#include "base/json_util.h"

namespace podshaper {
namespace {

using json = nlohmann::json;

constexpr std::string_view kTrainerGroup = "trainer.kubeflow.org/";
constexpr const char* kAncestorLabel = "trainer.kubeflow.org/trainjob-ancestor-step";

bool inTrainerGroup(const json& object) { return stringMember(object, "apiVersion").starts_with(kTrainerGroup); }

// The replicated job the trainer runs in: labelled as the trainer step, else named "node".
json* trainerStep(json& runtime) {
  if (!member(member(member(member(runtime, "spec"), "template"), "spec"), "replicatedJobs").is_array()) return nullptr;
  json& list = runtime["spec"]["template"]["spec"]["replicatedJobs"];
  for (json& job : list) {
    if (stringMember(member(member(member(job, "template"), "metadata"), "labels"), kAncestorLabel) == "trainer") {
      return &job;
    }
  }
  for (json& job : list) {
    if (stringMember(job, "name") == "node") return &job;
  }
  return nullptr;
}

json* trainerContainer(json& step) {
  json& podSpec = step["template"]["spec"]["template"]["spec"];
  if (!member(podSpec, "containers").is_array() || podSpec["containers"].empty()) return nullptr;
  for (json& c : podSpec["containers"]) {
    if (stringMember(c, "name") == "node") return &c;
  }
  return &podSpec["containers"][0];
}

void setEnv(json& container, const std::string& name, const json& value) {
  json& env = container["env"];
  if (!env.is_array()) env = json::array();
  for (json& e : env) {
    if (stringMember(e, "name") == name) {
      e = {{"name", name}, {"value", value}};
      return;
    }
  }
  env.push_back({{"name", name}, {"value", value}});
}

}  // namespace

bool isTrainJob(const json& object) { return inTrainerGroup(object) && stringMember(object, "kind") == "TrainJob"; }

std::optional<RuntimeRef> runtimeRefOf(const json& trainJob) {
  const json& ref = member(member(trainJob, "spec"), "runtimeRef");
  std::string name = stringMember(ref, "name");
  if (name.empty()) return std::nullopt;
  std::string kind = stringMember(ref, "kind");
  return RuntimeRef{kind.empty() ? "ClusterTrainingRuntime" : kind, name};
}

bool isRuntime(const json& object, const RuntimeRef& ref, const std::string& ns) {
  if (!inTrainerGroup(object) || stringMember(object, "kind") != ref.kind) return false;
  const json& meta = member(object, "metadata");
  if (stringMember(meta, "name") != ref.name) return false;
  const std::string own = stringMember(meta, "namespace");
  return ref.kind == "ClusterTrainingRuntime" || own.empty() || own == ns;
}

TrainJobRuntime runtimeForTrainJob(const json& runtime, const json& trainJob) {
  TrainJobRuntime out{runtime, {}, {}};
  const json& trainer = member(member(trainJob, "spec"), "trainer");
  const json& mlPolicy = member(member(runtime, "spec"), "mlPolicy");
  json* step = trainerStep(out.runtime);
  if (step == nullptr || !member(member(member(member(*step, "template"), "spec"), "template"), "spec").is_object()) {
    if (trainer.is_object() && !trainer.empty()) {
      out.notApplied.push_back("spec.trainer (the runtime has no trainer step)");
    }
    return out;
  }
  const std::string stepName = "replicated job " + json(stringMember(*step, "name")).dump();
  // The nodes: the TrainJob's, else the runtime's mlPolicy's.
  std::optional<json> numNodes;
  if (const json& n = member(trainer, "numNodes"); n.is_number_integer()) {
    numNodes = n;
    out.applied.push_back("numNodes " + n.dump() + " (" + stepName + ")");
  } else if (!n.is_null()) {
    out.notApplied.push_back("spec.trainer.numNodes " + n.dump() + " (not an integer)");
  } else if (const json& m = member(mlPolicy, "numNodes"); m.is_number_integer()) {
    numNodes = m;
    out.applied.push_back("the runtime's mlPolicy.numNodes " + m.dump() + " (" + stepName + ")");
  }
  if (numNodes) {
    (*step)["template"]["spec"]["parallelism"] = *numNodes;
    (*step)["template"]["spec"]["completions"] = *numNodes;
  }
  json* container = trainerContainer(*step);
  if (container == nullptr) {
    if (trainer.is_object() && !trainer.empty()) {
      out.notApplied.push_back("spec.trainer (the trainer step has no container)");
    }
    return out;
  }
  const std::string containerName = "container " + json(stringMember(*container, "name")).dump();
  if (const json& resources = member(trainer, "resourcesPerNode"); resources.is_object()) {
    (*container)["resources"] = resources;
    out.applied.push_back("resourcesPerNode (" + containerName + ")");
  } else if (!resources.is_null()) {
    out.notApplied.push_back("spec.trainer.resourcesPerNode (not an object)");
  }
  for (const char* field : {"image", "command", "args"}) {
    if (trainer.contains(field)) {
      (*container)[field] = trainer[field];
      out.applied.push_back(std::string(field) + " (" + containerName + ")");
    }
  }
  for (const json& e : member(trainer, "env")) {
    const std::string name = stringMember(e, "name");
    if (!name.empty() && e.contains("value")) {
      setEnv(*container, name, e["value"]);
    } else {
      out.notApplied.push_back("spec.trainer.env " + (name.empty() ? std::string("entry") : json(name).dump()) +
                               " (no value: valueFrom is read in the cluster)");
    }
  }
  // The torch plugin's torchrun settings: PET_NNODES and PET_NPROC_PER_NODE ("auto": the GPUs).
  if (const json& torch = member(mlPolicy, "torch"); torch.is_object()) {
    setEnv(*container, "PET_NNODES", numNodes ? numNodes->dump() : std::string("1"));
    json procs = member(trainer, "numProcPerNode");
    if (procs.is_null()) procs = member(torch, "numProcPerNode");
    if (hasText(procs, "auto")) {
      const json& gpus = member(member(member(*container, "resources"), "limits"), "nvidia.com/gpu");
      procs = gpus.is_null() ? json() : json(gpus.is_string() ? gpus.get<std::string>() : gpus.dump());
    }
    if (!procs.is_null()) {
      const std::string text = procs.is_string() ? procs.get<std::string>() : procs.dump();
      setEnv(*container, "PET_NPROC_PER_NODE", text);
      out.applied.push_back("numProcPerNode " + text + " (" + containerName + ")");
    }
  } else if (const json& procs = member(trainer, "numProcPerNode"); !procs.is_null()) {
    const std::string text = procs.is_string() ? procs.get<std::string>() : procs.dump();
    setEnv(*container, "PET_NPROC_PER_NODE", text);
    out.applied.push_back("numProcPerNode " + text + " (" + containerName + ")");
  }
  for (const char* field : {"podTemplateOverrides", "podSpecOverrides"}) {
    if (member(trainJob, "spec").contains(field)) out.notApplied.push_back("spec." + std::string(field));
  }
  return out;
}

}  // namespace podshaper
