#include "shaping/workload.h"

#include <gtest/gtest.h>

#include "pod_builder.h"

namespace podshaper {
namespace {

using json = nlohmann::json;
using testing::TrainingPod;

// A Job whose template is the training pod's metadata and spec.
json jobOf(const json& pod) {
  json podTemplate = {{"metadata", pod["metadata"]}, {"spec", pod["spec"]}};
  podTemplate["metadata"].erase("name");
  podTemplate["metadata"].erase("namespace");
  return {{"apiVersion", "batch/v1"},
          {"kind", "Job"},
          {"metadata", {{"name", "train"}, {"namespace", "ml"}}},
          {"spec", {{"completions", 2}, {"template", podTemplate}}}};
}

AdmissionContext inNamespace(const std::string& name) {
  AdmissionContext context;
  context.namespaceName = name;
  return context;
}

TEST(ReviewWorkload, AJobsTemplateIsShapedAsItsPodsWouldBe) {
  json job = jobOf(TrainingPod().json());
  WorkloadReview review = reviewWorkload(job, Config(), inNamespace("ml"));
  ASSERT_EQ(review.templates.size(), 1u);
  EXPECT_EQ(review.templates[0].where, "spec.template");
  EXPECT_TRUE(review.templates[0].called);
  EXPECT_TRUE(review.templates[0].allowed);
  EXPECT_FALSE(review.denied());
  const json& shaped = review.object["spec"]["template"];
  // The same shaping as the pod itself, in its namespace, made by the Job.
  json pod = TrainingPod().json();
  pod["metadata"]["ownerReferences"] = json::parse(R"([{"apiVersion": "batch/v1", "kind": "Job", "name": "train",
      "controller": true}])");
  ShapeOutcome direct = shapePod(pod, Config(), inNamespace("ml"));
  EXPECT_EQ(shaped["spec"], direct.pod["spec"]);
  EXPECT_EQ(shaped["metadata"]["annotations"], direct.pod["metadata"]["annotations"]);
  EXPECT_EQ(shaped["metadata"]["labels"]["podshaper.io/shaped"], "true");
  EXPECT_FALSE(shaped["metadata"].contains("namespace"));  // not added where it was not written
  EXPECT_FALSE(shaped["metadata"].contains("ownerReferences"));  // the Job controller's to write
  // The Job's own fields are as written.
  EXPECT_EQ(review.object["metadata"], job["metadata"]);
  EXPECT_EQ(review.object["spec"]["completions"], 2);
}

// The pods a Job makes are known by it (their ShmProfile, their NVLink group), as the
// webhook knows them by their controller reference; a Deployment's are made by a ReplicaSet
// review cannot name, a Job with no name yet has none.
TEST(ReviewWorkload, AJobsPodsAreKnownByTheJob) {
  auto profileOf = [](const json& object) {
    WorkloadReview review = reviewWorkload(object, Config(), inNamespace("ml"));
    const json& annotations = review.object["spec"]["template"]["metadata"]["annotations"];
    return annotations.value("podshaper.io/shm-profile", std::string());
  };
  json job = jobOf(TrainingPod().json());
  EXPECT_EQ(profileOf(job).rfind("job.train;", 0), 0u) << profileOf(job);
  json unnamed = job;
  unnamed["metadata"].erase("name");
  unnamed["metadata"]["generateName"] = "train-";
  EXPECT_EQ(profileOf(unnamed), "");
  json deployment = job;
  deployment["apiVersion"] = "apps/v1";
  deployment["kind"] = "Deployment";
  EXPECT_EQ(profileOf(deployment), "");
}

TEST(ReviewWorkload, APodIsShapedWhole) {
  WorkloadReview review = reviewWorkload(TrainingPod().json(), Config(), inNamespace("ml"));
  ASSERT_EQ(review.templates.size(), 1u);
  EXPECT_EQ(review.templates[0].where, "");
  EXPECT_EQ(review.object, shapePod(TrainingPod().json(), Config(), inNamespace("ml")).pod);
}

TEST(ReviewWorkload, ATemplateNotLabelledIsNotCalledAndLeftAsWritten) {
  json job = jobOf(TrainingPod().json());
  job["spec"]["template"]["metadata"]["labels"].erase("podshaper.io/inject");
  job["metadata"]["labels"] = {{"podshaper.io/inject", "true"}};  // on the Job: no effect, as in a cluster
  WorkloadReview review = reviewWorkload(job, Config(), inNamespace("ml"));
  ASSERT_EQ(review.templates.size(), 1u);
  EXPECT_FALSE(review.templates[0].called);
  EXPECT_TRUE(review.templates[0].allowed);
  EXPECT_EQ(review.object, job);
}

TEST(ReviewWorkload, ADenialLeavesTheTemplateAndSaysWhy) {
  json job = jobOf(TrainingPod().annotate("podshaper.io/batch-dtype", "fp8").json());
  WorkloadReview review = reviewWorkload(job, Config(), inNamespace("ml"));
  ASSERT_EQ(review.templates.size(), 1u);
  EXPECT_FALSE(review.templates[0].allowed);
  EXPECT_TRUE(review.denied());
  EXPECT_NE(review.templates[0].message.find("podshaper.io/batch-dtype"), std::string::npos)
      << review.templates[0].message;
  EXPECT_EQ(review.object, job);
}

TEST(ReviewWorkload, EachTemplateOnItsOwn) {
  json ok = jobOf(TrainingPod().json())["spec"]["template"];
  json bad = jobOf(TrainingPod().annotate("podshaper.io/batch-dtype", "fp8").json())["spec"]["template"];
  json pytorch = {{"kind", "PyTorchJob"},
                  {"metadata", {{"name", "p"}}},
                  {"spec", {{"pytorchReplicaSpecs", {{"Master", {{"template", ok}}}, {"Worker", {{"template", bad}}}}}}}};
  WorkloadReview review = reviewWorkload(pytorch, Config(), inNamespace("ml"));
  ASSERT_EQ(review.templates.size(), 2u);
  EXPECT_TRUE(review.templates[0].allowed);
  EXPECT_FALSE(review.templates[1].allowed);
  EXPECT_NE(review.object["spec"]["pytorchReplicaSpecs"]["Master"]["template"], ok);
  EXPECT_EQ(review.object["spec"]["pytorchReplicaSpecs"]["Worker"]["template"], bad);
}

TEST(ReviewWorkload, NoTemplateNothingDone) {
  json cm = {{"kind", "ConfigMap"}, {"data", {{"a", "b"}}}};
  WorkloadReview review = reviewWorkload(cm, Config(), inNamespace("ml"));
  EXPECT_TRUE(review.templates.empty());
  EXPECT_EQ(review.object, cm);
}

}  // namespace
}  // namespace podshaper
