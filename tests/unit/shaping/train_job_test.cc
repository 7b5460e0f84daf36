#include "shaping/train_job.h"

#include <gtest/gtest.h>

namespace podshaper {
namespace {

using json = nlohmann::json;

json runtime() {
  return json::parse(R"({
    "apiVersion": "trainer.kubeflow.org/v1alpha1", "kind": "ClusterTrainingRuntime",
    "metadata": {"name": "torch-distributed"},
    "spec": {"template": {"spec": {"replicatedJobs": [
      {"name": "dataset-initializer", "template": {"spec": {"template": {"spec": {"containers": [{"name": "init"}]}}}}},
      {"name": "trainer-step", "template": {
        "metadata": {"labels": {"trainer.kubeflow.org/trainjob-ancestor-step": "trainer"}},
        "spec": {"template": {"spec": {"containers": [{"name": "sidecar"}, {"name": "node", "env": [{"name": "A", "value": "1"}]}]}}}}}
    ]}}}})");
}

json trainJob(const json& trainer) {
  return {{"apiVersion", "trainer.kubeflow.org/v1alpha1"},
          {"kind", "TrainJob"},
          {"metadata", {{"name", "resnet"}, {"namespace", "vision"}}},
          {"spec", {{"runtimeRef", {{"name", "torch-distributed"}}}, {"trainer", trainer}}}};
}

TEST(TrainJob, NamesItsRuntimeClusterWideByDefault) {
  json job = trainJob(json::object());
  ASSERT_TRUE(isTrainJob(job));
  auto ref = runtimeRefOf(job);
  ASSERT_TRUE(ref);
  EXPECT_EQ(ref->kind, "ClusterTrainingRuntime");
  EXPECT_EQ(ref->name, "torch-distributed");
  EXPECT_TRUE(isRuntime(runtime(), *ref, "vision"));
  json namespaced = runtime();
  namespaced["kind"] = "TrainingRuntime";
  namespaced["metadata"]["namespace"] = "other";
  EXPECT_FALSE(isRuntime(namespaced, *ref, "vision"));
  EXPECT_FALSE(isRuntime(namespaced, RuntimeRef{"TrainingRuntime", "torch-distributed"}, "vision"))
      << "a TrainingRuntime of another namespace is not the one a TrainJob names";
  EXPECT_TRUE(isRuntime(namespaced, RuntimeRef{"TrainingRuntime", "torch-distributed"}, "other"));
  EXPECT_FALSE(isTrainJob(json{{"apiVersion", "example.com/v1"}, {"kind", "TrainJob"}}));
  EXPECT_FALSE(runtimeRefOf(json{{"kind", "TrainJob"}, {"spec", json::object()}}));
}

TEST(TrainJob, OverridesTheTrainerStepAsTheControllerDoes) {
  TrainJobRuntime out = runtimeForTrainJob(
      runtime(), trainJob({{"numNodes", 4},
                           {"numProcPerNode", 8},
                           {"resourcesPerNode", {{"limits", {{"nvidia.com/gpu", 8}}}}},
                           {"env", json::array({{{"name", "A"}, {"value", "2"}}})}}));
  const json& step = out.runtime["spec"]["template"]["spec"]["replicatedJobs"][1]["template"]["spec"];
  EXPECT_EQ(step["parallelism"], 4);
  EXPECT_EQ(step["completions"], 4);
  const json& node = step["template"]["spec"]["containers"][1];
  EXPECT_EQ(node["resources"]["limits"]["nvidia.com/gpu"], 8);
  EXPECT_EQ(node["env"], json::parse(R"([{"name": "A", "value": "2"}, {"name": "PET_NPROC_PER_NODE", "value": "8"}])"));
  EXPECT_FALSE(step["template"]["spec"]["containers"][0].contains("resources")) << "only the trainer container";
  EXPECT_FALSE(out.runtime["spec"]["template"]["spec"]["replicatedJobs"][0]["template"]["spec"].contains("parallelism"));
  EXPECT_EQ(out.applied.size(), 3u);
  EXPECT_TRUE(out.notApplied.empty());
}

TEST(TrainJob, SaysWhatItCannotApply) {
  json job = trainJob({{"numNodes", 2}});
  job["spec"]["podTemplateOverrides"] = json::array({{{"targetJobs", json::array({{{"name", "node"}}})}}});
  EXPECT_EQ(runtimeForTrainJob(runtime(), job).notApplied, std::vector<std::string>{"spec.podTemplateOverrides"});
  json noSteps = runtime();
  noSteps["spec"]["template"]["spec"]["replicatedJobs"] = json::array();
  TrainJobRuntime out = runtimeForTrainJob(noSteps, job);
  EXPECT_EQ(out.runtime, noSteps);
  ASSERT_FALSE(out.notApplied.empty());
  EXPECT_NE(out.notApplied.front().find("no trainer step"), std::string::npos);
}

TEST(TrainJob, TheTorchPolicysTorchrunSettings) {
  json r = runtime();
  r["spec"]["mlPolicy"] = {{"numNodes", 3}, {"torch", {{"numProcPerNode", "auto"}}}};
  // numNodes from the runtime's policy; "auto": the GPUs of the trainer container.
  TrainJobRuntime out = runtimeForTrainJob(r, trainJob({{"resourcesPerNode", {{"limits", {{"nvidia.com/gpu", 4}}}}}}));
  const json& step = out.runtime["spec"]["template"]["spec"]["replicatedJobs"][1]["template"]["spec"];
  EXPECT_EQ(step["parallelism"], 3);
  EXPECT_EQ(step["template"]["spec"]["containers"][1]["env"],
            json::parse(R"([{"name": "A", "value": "1"}, {"name": "PET_NNODES", "value": "3"},
                            {"name": "PET_NPROC_PER_NODE", "value": "4"}])"));
  // The TrainJob's numNodes wins; one node is what torchrun is told as PET_NNODES.
  out = runtimeForTrainJob(r, trainJob({{"numNodes", 1}, {"numProcPerNode", 2}}));
  const json& one = out.runtime["spec"]["template"]["spec"]["replicatedJobs"][1]["template"]["spec"];
  EXPECT_EQ(one["completions"], 1);
  EXPECT_EQ(one["template"]["spec"]["containers"][1]["env"][1], json::parse(R"({"name": "PET_NNODES", "value": "1"})"));
  EXPECT_EQ(one["template"]["spec"]["containers"][1]["env"][2], json::parse(R"({"name": "PET_NPROC_PER_NODE", "value": "2"})"));
}

TEST(TrainJob, WhatItCannotReadIsSaid) {
  TrainJobRuntime out = runtimeForTrainJob(
      runtime(), trainJob({{"numNodes", "2"},
                           {"resourcesPerNode", "8 GPUs"},
                           {"env", json::array({{{"name", "TOKEN"}, {"valueFrom", {{"secretKeyRef", {{"name", "s"}}}}}}})}}));
  ASSERT_EQ(out.notApplied.size(), 3u);
  EXPECT_NE(out.notApplied[0].find("numNodes \"2\" (not an integer)"), std::string::npos) << out.notApplied[0];
  EXPECT_NE(out.notApplied[1].find("resourcesPerNode (not an object)"), std::string::npos) << out.notApplied[1];
  EXPECT_NE(out.notApplied[2].find("\"TOKEN\" (no value"), std::string::npos) << out.notApplied[2];
}

TEST(TrainJob, FindsAStepNamedNodeWithoutTheLabel) {
  json r = runtime();
  auto& jobs = r["spec"]["template"]["spec"]["replicatedJobs"];
  jobs[1]["template"].erase("metadata");
  jobs[1]["name"] = "node";
  TrainJobRuntime out = runtimeForTrainJob(r, trainJob({{"numNodes", 3}}));
  EXPECT_EQ(out.runtime["spec"]["template"]["spec"]["replicatedJobs"][1]["template"]["spec"]["parallelism"], 3);
}

}  // namespace
}  // namespace podshaper
