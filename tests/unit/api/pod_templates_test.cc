#include "api/pod_templates.h"

#include <gtest/gtest.h>

namespace podshaper {
namespace {

using json = nlohmann::json;

json templateSpec() { return {{"metadata", {{"labels", {{"app", "x"}}}}}, {"spec", {{"containers", json::array({{{"name", "c"}}})}}}}; }

std::vector<std::string> wheres(const json& object) {
  std::vector<std::string> out;
  for (const auto& at : podTemplates(object)) {
    EXPECT_TRUE(object.at(at.pointer).is_object()) << at.where;
    out.push_back(at.where);
  }
  return out;
}

TEST(PodTemplates, APodIsItsOwnTemplate) {
  json pod = {{"kind", "Pod"}, {"spec", {{"containers", json::array()}}}};
  auto found = podTemplates(pod);
  ASSERT_EQ(found.size(), 1u);
  EXPECT_TRUE(found[0].pointer.empty());
  EXPECT_EQ(found[0].where, "");
}

TEST(PodTemplates, TheKindsUsersSubmit) {
  EXPECT_EQ(wheres({{"kind", "Job"}, {"spec", {{"template", templateSpec()}}}}),
            std::vector<std::string>{"spec.template"});
  EXPECT_EQ(wheres({{"kind", "CronJob"}, {"spec", {{"jobTemplate", {{"spec", {{"template", templateSpec()}}}}}}}}),
            std::vector<std::string>{"spec.jobTemplate.spec.template"});
  json jobset = {{"kind", "JobSet"},
                 {"spec",
                  {{"replicatedJobs",
                    json::array({{{"name", "leader"}, {"template", {{"spec", {{"template", templateSpec()}}}}}},
                                 {{"name", "workers"}, {"template", {{"spec", {{"template", templateSpec()}}}}}}})}}}};
  EXPECT_EQ(wheres(jobset), (std::vector<std::string>{"spec.replicatedJobs[0].template.spec.template",
                                                      "spec.replicatedJobs[1].template.spec.template"}));
  json pytorch = {{"kind", "PyTorchJob"},
                  {"spec",
                   {{"pytorchReplicaSpecs",
                     {{"Master", {{"replicas", 1}, {"template", templateSpec()}}},
                      {"Worker", {{"replicas", 3}, {"template", templateSpec()}}}}}}}};
  EXPECT_EQ(wheres(pytorch), (std::vector<std::string>{"spec.pytorchReplicaSpecs.Master.template",
                                                       "spec.pytorchReplicaSpecs.Worker.template"}));
  EXPECT_EQ(wheres({{"kind", "PodTemplate"}, {"template", templateSpec()}}), std::vector<std::string>{"template"});
}

TEST(PodTemplates, KeysThatAreNotPlainNamesAreQuoted) {
  json odd = {{"kind", "X"}, {"spec", {{"a.b", {{"template", templateSpec()}}}}}};
  EXPECT_EQ(wheres(odd), std::vector<std::string>{"spec[\"a.b\"].template"});
}

TEST(PodTemplates, NoneWhereThereIsNone) {
  EXPECT_TRUE(podTemplates({{"kind", "ConfigMap"}, {"data", {{"spec", "containers"}}}}).empty());
  EXPECT_TRUE(podTemplates(json::array()).empty());
  EXPECT_TRUE(podTemplates(json("text")).empty());
  // The workload's own metadata and status are not read.
  EXPECT_TRUE(podTemplates({{"kind", "X"}, {"status", {{"t", templateSpec()}}}}).empty());
}

TEST(PodTemplates, DeepNestingIsNotFollowedForever) {
  json deep = templateSpec();
  for (int i = 0; i < 200; ++i) deep = json{{"x", std::move(deep)}};
  EXPECT_TRUE(podTemplates({{"kind", "X"}, {"spec", deep}}).empty());
}

}  // namespace
}  // namespace podshaper
