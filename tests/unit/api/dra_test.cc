#include "api/dra.h"

#include <gtest/gtest.h>

namespace podshaper {
namespace {

using nlohmann::json;

json claimSpec(json requests) { return {{"devices", {{"requests", std::move(requests)}}}}; }

TEST(Dra, ExactCountAllAndOtherDevices) {
  auto r = gpuRequests(claimSpec(json::parse(R"([
      {"name": "gpus", "exactly": {"deviceClassName": "gpu.nvidia.com", "count": 8}},
      {"name": "one", "exactly": {"deviceClassName": "gpu.nvidia.com"}},
      {"name": "node", "exactly": {"deviceClassName": "gpu.nvidia.com", "allocationMode": "All"}},
      {"name": "nic", "exactly": {"deviceClassName": "rdma.example.com", "count": 4}}])")),
                       "gpu.nvidia.com");
  ASSERT_TRUE(r) << r.error().message;
  ASSERT_EQ(r->size(), 3u);
  EXPECT_EQ((*r)[0].name, "gpus");
  EXPECT_EQ((*r)[0].count, 8u);
  EXPECT_EQ((*r)[1].count, 1u);  // ExactCount without a count is one device
  EXPECT_TRUE((*r)[2].all);
}

TEST(Dra, ThePrioritizedListsFirstChoiceCounts) {
  auto r = gpuRequests(claimSpec(json::parse(R"([{"name": "gpus", "firstAvailable": [
      {"name": "eight", "deviceClassName": "gpu.nvidia.com", "count": 8},
      {"name": "four", "deviceClassName": "gpu.nvidia.com", "count": 4}]}])")),
                       "gpu.nvidia.com");
  ASSERT_TRUE(r) << r.error().message;
  ASSERT_EQ(r->size(), 1u);
  EXPECT_EQ((*r)[0].count, 8u);
  EXPECT_EQ((*r)[0].chosen, "eight");
}

TEST(Dra, TheDeviceClassIsConfigurable) {
  json spec = claimSpec(json::parse(R"([{"name": "g", "exactly": {"deviceClassName": "gpu.example.com", "count": 2}}])"));
  EXPECT_TRUE(gpuRequests(spec, "gpu.nvidia.com")->empty());
  EXPECT_EQ(gpuRequests(spec, "gpu.example.com")->at(0).count, 2u);
}

TEST(Dra, BadRequestsAreClearErrors) {
  auto zero = gpuRequests(
      claimSpec(json::parse(R"([{"name": "g", "exactly": {"deviceClassName": "gpu.nvidia.com", "count": 0}}])")),
      "gpu.nvidia.com");
  ASSERT_FALSE(zero);
  EXPECT_EQ(zero.error().message, "device request \"g\": count 0 is not a positive integer");
  auto mode = gpuRequests(
      claimSpec(json::parse(
          R"([{"name": "g", "exactly": {"deviceClassName": "gpu.nvidia.com", "allocationMode": "Some"}}])")),
      "gpu.nvidia.com");
  ASSERT_FALSE(mode);
  EXPECT_NE(mode.error().message.find("neither ExactCount nor All"), std::string::npos);
  EXPECT_TRUE(gpuRequests(json::object(), "gpu.nvidia.com")->empty());
  EXPECT_FALSE(gpuRequests(json{{"devices", {{"requests", "x"}}}}, "gpu.nvidia.com"));
}

TEST(Dra, AdminAccessGivesThePodNoGpus) {
  auto r = gpuRequests(claimSpec(json::parse(R"([{"name": "watch", "exactly":
      {"deviceClassName": "gpu.nvidia.com", "allocationMode": "All", "adminAccess": true}}])")),
                       "gpu.nvidia.com");
  ASSERT_TRUE(r) << r.error().message;
  EXPECT_TRUE(r->empty());
}

// A ComputeDomain's IMEX channel: asked, and never a GPU.
TEST(Dra, AChannelClaimIsFoundAndCountsNoGpu) {
  const std::string channel = "compute-domain-default-channel.nvidia.com";
  json spec = claimSpec(json::parse(R"([
      {"name": "channel", "exactly": {"deviceClassName": "compute-domain-default-channel.nvidia.com"}}])"));
  EXPECT_TRUE(requestsDeviceClass(spec, channel));
  EXPECT_FALSE(requestsDeviceClass(spec, "gpu.nvidia.com"));
  EXPECT_TRUE(gpuRequests(spec, "gpu.nvidia.com")->empty());
  json first = claimSpec(json::parse(R"([{"name": "c", "firstAvailable": [
      {"name": "a", "deviceClassName": "compute-domain-default-channel.nvidia.com"},
      {"name": "b", "deviceClassName": "other"}]}])"));
  EXPECT_TRUE(requestsDeviceClass(first, channel));
  EXPECT_FALSE(requestsDeviceClass(first, "other"));  // only the first choice, as GPUs are counted
  EXPECT_FALSE(requestsDeviceClass(json::object(), channel));
  EXPECT_FALSE(requestsDeviceClass({{"devices", {{"requests", "x"}}}}, channel));
}

// A ComputeDomain in users' manifests stands for the channel template its driver makes.
json computeDomain(const std::string& ns, const std::string& templateName) {
  json domain = json::parse(R"({"apiVersion": "resource.nvidia.com/v1beta1", "kind": "ComputeDomain",
      "metadata": {"name": "imex-domain"}, "spec": {"numNodes": 2}})");
  if (!ns.empty()) domain["metadata"]["namespace"] = ns;
  if (!templateName.empty()) domain["spec"]["channel"]["resourceClaimTemplate"]["name"] = templateName;
  return domain;
}

TEST(Dra, AComputeDomainIsReadAsItsChannelTemplate) {
  EXPECT_TRUE(isComputeDomain(computeDomain("ml", "imex-channel")));
  EXPECT_FALSE(isComputeDomain(json{{"apiVersion", "example.com/v1"}, {"kind", "ComputeDomain"}}));
  EXPECT_FALSE(isComputeDomain(json{{"apiVersion", "resource.nvidia.com/v1beta1"}, {"kind", "ComputeDomainClique"}}));
  auto made = channelTemplateOf(computeDomain("ml", "imex-channel"), "channel.example.com");
  ASSERT_TRUE(made) << made.error().message;
  EXPECT_EQ((*made)["kind"], "ResourceClaimTemplate");
  EXPECT_EQ((*made)["metadata"]["name"], "imex-channel");
  EXPECT_EQ((*made)["metadata"]["namespace"], "ml");
  const json& spec = (*made)["spec"]["spec"];
  EXPECT_TRUE(requestsDeviceClass(spec, "channel.example.com"));  // the configured class
  EXPECT_EQ(spec["devices"]["requests"].size(), 1u);
  EXPECT_TRUE(gpuRequests(spec, "gpu.nvidia.com")->empty());
}

TEST(Dra, AComputeDomainWithoutTheTemplatesNameIsAnErrorNamingTheField) {
  auto made = channelTemplateOf(computeDomain("ml", ""), "c");
  ASSERT_FALSE(made);
  EXPECT_NE(made.error().message.find("spec.channel.resourceClaimTemplate.name is not set"), std::string::npos);
  std::vector<std::string> warnings;
  auto claims = withChannelTemplates({}, {computeDomain("ml", "")}, "c", warnings);
  EXPECT_TRUE(claims.empty());
  ASSERT_EQ(warnings.size(), 1u);
  EXPECT_EQ(warnings[0].find("ComputeDomain ml/imex-domain: not read"), 0u) << warnings[0];
  EXPECT_NE(warnings[0].find("spec.channel.resourceClaimTemplate.name"), std::string::npos);
}

TEST(Dra, ATemplateGivenWinsOverTheOneAComputeDomainWouldMake) {
  json given = json::parse(R"({"kind": "ResourceClaimTemplate", "metadata": {"namespace": "ml", "name": "imex-channel"},
      "spec": {"spec": {"devices": {"requests": [{"name": "mine", "exactly": {"deviceClassName": "own.example.com"}}]}}}})");
  json claim = given;  // a ResourceClaim of that name is no template
  claim["kind"] = "ResourceClaim";
  std::vector<std::string> warnings;
  auto claims = withChannelTemplates({given}, {computeDomain("ml", "imex-channel")}, "c", warnings);
  ASSERT_EQ(claims.size(), 1u);
  EXPECT_EQ(claims[0], given);
  // Another namespace's template, or a claim of that name, does not stand for it.
  given["metadata"]["namespace"] = "other";
  claims = withChannelTemplates({given, claim}, {computeDomain("ml", "imex-channel"), computeDomain("ml", "imex-channel")},
                                "c", warnings);
  ASSERT_EQ(claims.size(), 3u);  // two ComputeDomains naming one template make it once
  EXPECT_EQ(claims[2]["metadata"]["namespace"], "ml");
  EXPECT_TRUE(requestsDeviceClass(claims[2]["spec"]["spec"], "c"));
  EXPECT_TRUE(warnings.empty());
}

}  // namespace
}  // namespace podshaper
