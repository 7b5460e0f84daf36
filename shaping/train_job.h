#pragma once

#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

// A Kubeflow Trainer TrainJob (trainer.kubeflow.org) has no pod template of its own: the
// Trainer controller makes a JobSet from the runtime its spec.runtimeRef names, with the
// TrainJob's `trainer` overrides applied to the runtime's trainer step. podshaper is
// called for those pods, so the opt-in label and podshaper's annotations go in the
// runtime's pod templates.
namespace podshaper {

// What spec.runtimeRef names: kind ClusterTrainingRuntime (the default) or TrainingRuntime
// (of the TrainJob's namespace).
struct RuntimeRef {
  std::string kind;
  std::string name;
};

// Whether `object` is a TrainJob.
bool isTrainJob(const nlohmann::json& object);

// The runtime a TrainJob names; nullopt when it names none.
std::optional<RuntimeRef> runtimeRefOf(const nlohmann::json& trainJob);

// Whether `object` is the runtime `ref` names, for a TrainJob of namespace `ns`.
bool isRuntime(const nlohmann::json& object, const RuntimeRef& ref, const std::string& ns);

// The runtime as the Trainer controller makes the TrainJob's JobSet from it: on the trainer
// step (the replicated job labelled trainer.kubeflow.org/trainjob-ancestor-step: trainer,
// else the one named "node"), trainer.numNodes (else the runtime's mlPolicy.numNodes) as
// the Job's parallelism and completions, and on its trainer container ("node", else the
// first) resourcesPerNode as its resources, image, command, args and env; with the torch
// policy, torchrun's PET_NNODES and PET_NPROC_PER_NODE ("auto": the container's GPUs).
// `applied` says each override in words; `notApplied` those podshaper does not model
// (podTemplateOverrides, env from valueFrom) or could not read.
struct TrainJobRuntime {
  nlohmann::json runtime;
  std::vector<std::string> applied, notApplied;
};
TrainJobRuntime runtimeForTrainJob(const nlohmann::json& runtime, const nlohmann::json& trainJob);

}  // namespace podshaper
