// Multi-node NVLink (docs/agent.md "Multi-node NVLink"): NVML's GPU fabric info, recorded and
// replayed through the real backend into the report, and the node's NVLink domain read from
// it. No machine here has such a fabric: the racks are synthetic (tests/fixtures/mnnvl).
#include <gtest/gtest.h>

#include <filesystem>
#include <functional>
#include <map>
#include <set>

#include "agent/backend.h"
#include "agent/gpu_recording.h"
#include "api/report.h"
#include "base/timefmt.h"
#include "judging/verdict.h"
#include "tests/unit/agent/recordings.h"

namespace podshaper::agent {
namespace {

using nlohmann::json;

Topology probe(const json& recording) {
  auto topo = probeRecording(recording);
  EXPECT_TRUE(topo.ok()) << (topo.ok() ? "" : topo.error().message);
  return topo.ok() ? *topo : Topology{};
}

// The rack's nodes by their domain's id: what a scheduler keeping a job in one domain sees.
std::map<std::string, std::vector<NvlinkDomain>> domainsOf(const std::string& rack) {
  std::map<std::string, std::vector<NvlinkDomain>> domains;
  for (const RackNode& node : rackNodes(rack)) {
    auto domain = nvlinkDomainOf(probe(node.recording));
    EXPECT_TRUE(domain.has_value()) << node.name;
    if (domain) domains[domain->id].push_back(*domain);
  }
  return domains;
}

TEST(Mnnvl, EighteenNodesOfFourGpusInOneCliqueAreOneDomainOf72Gpus) {
  auto nodes = rackNodes("one-clique");
  ASSERT_EQ(nodes.size(), 18u);
  Topology first = probe(nodes[0].recording);
  ASSERT_EQ(first.gpus.size(), 4u);
  ASSERT_TRUE(first.gpus[0].fabric.has_value());
  EXPECT_EQ(*first.gpus[0].fabric, (GpuFabric{"9277d399-0674-44a9-b64e-d85bb19ce2b0", 32766, "Completed", "Success",
                                              426}));
  for (const GpuPair& pair : first.pairs) EXPECT_EQ(pair.link, "NV18");  // within the node, as before

  auto domains = domainsOf("one-clique");
  ASSERT_EQ(domains.size(), 1u);
  const auto& [id, members] = *domains.begin();
  EXPECT_EQ(id, "9277d399-0674-44a9-b64e-d85bb19ce2b0.32766");  // GFD's nvidia.com/gpu.clique value
  int gpus = 0;
  for (const NvlinkDomain& d : members) {
    gpus += d.gpus;
    EXPECT_TRUE(d.completed && d.healthy && d.healthKnown);
    EXPECT_EQ(d.problem, NvlinkDomain::Problem::kNone);
    EXPECT_EQ(d.sentence(), "NVLink domain 9277d399-0674-44a9-b64e-d85bb19ce2b0.32766: 4 GPUs here, fabric completed, "
                            "healthy");
  }
  EXPECT_EQ(gpus, 72);
}

TEST(Mnnvl, TwoCliquesOfNineNodesAreTwoDomains) {
  auto domains = domainsOf("two-cliques");
  ASSERT_EQ(domains.size(), 2u);
  EXPECT_EQ(domains["5d0c51c2-1b7e-4f4e-9a57-3c2f1e0b8a61.1"].size(), 9u);
  EXPECT_EQ(domains["5d0c51c2-1b7e-4f4e-9a57-3c2f1e0b8a61.2"].size(), 9u);
}

TEST(Mnnvl, NodesWhoseFabricIsInProgressSaySo) {
  auto nodes = rackNodes("in-progress");
  ASSERT_EQ(nodes.size(), 18u);
  for (const RackNode& node : nodes) {
    auto d = nvlinkDomainOf(probe(node.recording));
    ASSERT_TRUE(d.has_value()) << node.name;
    if (node.node < 16) {
      EXPECT_TRUE(d->completed) << node.name;
      continue;
    }
    EXPECT_FALSE(d->completed);
    EXPECT_EQ(d->problem, NvlinkDomain::Problem::kInProgress);
    EXPECT_EQ(d->sentence(), "NVLink domain 0f3e7a2b-66c1-4b0d-8e2f-9a4c1d5e7b30.32766: 4 GPUs here, fabric in "
                             "progress, healthy");
    EXPECT_EQ(d->problemWords, "the fabric registration of GPU0, GPU1, GPU2 and GPU3 is in progress; NCCL uses "
                               "multi-node NVLink only once every GPU's registration completed");
  }
}

TEST(Mnnvl, ANodeWithDegradedBandwidthIsUnhealthy) {
  for (const RackNode& node : rackNodes("unhealthy")) {
    auto d = nvlinkDomainOf(probe(node.recording));
    ASSERT_TRUE(d.has_value());
    if (node.node != 5) {
      EXPECT_TRUE(d->healthy) << node.name;
      continue;
    }
    EXPECT_TRUE(d->completed);
    EXPECT_FALSE(d->healthy);
    EXPECT_EQ(d->problem, NvlinkDomain::Problem::kUnhealthy);
    EXPECT_EQ(d->problemWords, "GPU1: degraded bandwidth");
    EXPECT_EQ(d->sentence(), "NVLink domain c41a9e07-2d3b-4f85-b6e1-7a0d2c9f4e18.32766: 4 GPUs here, fabric "
                             "completed, unhealthy (GPU1: degraded bandwidth)");
  }
}

TEST(Mnnvl, TheRackTemplateRecordsAsItReplays) {
  json node = mnnvlFixture("gb200-node.json");
  auto sources = replayGpus(node);
  ASSERT_TRUE(sources.ok()) << sources.error().message;
  EXPECT_EQ(recordGpus(*sources), node);
}

TEST(Mnnvl, TheMachinesRecordedHereHaveNoFabricAndNoDomain) {
  int machines = 0;
  for (const auto& entry : std::filesystem::directory_iterator(PODSHAPER_HARDWARE_DIR)) {
    if (!std::filesystem::exists(entry.path() / "gpu-recording.json")) continue;
    SCOPED_TRACE(entry.path().filename().string());
    ++machines;
    std::ifstream in(entry.path() / "gpu-recording.json");
    Topology topo = probe(json::parse(in));
    ASSERT_FALSE(topo.gpus.empty());
    for (const GpuInfo& gpu : topo.gpus) EXPECT_FALSE(gpu.fabric.has_value());
    EXPECT_FALSE(nvlinkDomainOf(topo).has_value());
    EXPECT_FALSE(toJson(topo)["gpus"][0].contains("fabric"));  // their reports stay as they were
  }
  EXPECT_GE(machines, 2);
}

// One GPU of the template changed.
json templateWith(const std::function<void(json& fabric)>& change, int gpu = 0) {
  json node = mnnvlFixture("gb200-node.json");
  change(node["nvml"]["gpus"][gpu]["fabric"]);
  return node;
}

TEST(Mnnvl, WhatNvmlAnswersOnHostsWithoutAFabricIsNoDomain) {
  // A 1×H200 VM or an H100 board: the call fails (NOT_SUPPORTED: nothing recorded), or
  // answers state NOT_SUPPORTED.
  json node = mnnvlFixture("gb200-node.json");
  for (json& gpu : node["nvml"]["gpus"]) gpu.erase("fabric");
  EXPECT_FALSE(nvlinkDomainOf(probe(node)).has_value());
  for (json& gpu : node["nvml"]["gpus"]) {
    gpu["fabric"] = {{"clusterUuid", "00000000-0000-0000-0000-000000000000"}, {"status", 0}, {"cliqueId", 0},
                     {"state", 0}};
  }
  Topology topo = probe(node);
  EXPECT_FALSE(topo.gpus[0].fabric.has_value());
  EXPECT_FALSE(nvlinkDomainOf(topo).has_value());
  // NVSwitch boards without multi-node NVLink: completed, with an all-zero cluster UUID.
  for (json& gpu : node["nvml"]["gpus"]) gpu["fabric"]["state"] = 3;
  topo = probe(node);
  ASSERT_TRUE(topo.gpus[0].fabric.has_value());
  EXPECT_EQ(topo.gpus[0].fabric->state, "Completed");
  EXPECT_FALSE(nvlinkDomainOf(topo).has_value());
}

TEST(Mnnvl, AnOlderDriverGivesNoHealthMask) {
  json node = mnnvlFixture("gb200-node.json");
  for (json& gpu : node["nvml"]["gpus"]) gpu["fabric"].erase("healthMask");
  Topology topo = probe(node);
  EXPECT_FALSE(topo.gpus[0].fabric->healthMask.has_value());
  EXPECT_TRUE(toJson(topo)["gpus"][0]["fabric"]["healthMask"].is_null());
  auto d = nvlinkDomainOf(topo);
  ASSERT_TRUE(d.has_value());
  EXPECT_FALSE(d->healthKnown);
  EXPECT_EQ(d->problem, NvlinkDomain::Problem::kNone);
  EXPECT_EQ(d->sentence(), "NVLink domain 9277d399-0674-44a9-b64e-d85bb19ce2b0.32766: 4 GPUs here, fabric completed, "
                           "health not reported");
}

TEST(Mnnvl, NvmlsStatesAndStatusesInWords) {
  auto fabricOf = [](const json& node) { return *probe(node).gpus[0].fabric; };
  EXPECT_EQ(fabricOf(templateWith([](json& f) { f["state"] = 1; })).state, "NotStarted");
  EXPECT_EQ(fabricOf(templateWith([](json& f) { f["state"] = 2; })).state, "InProgress");
  EXPECT_EQ(fabricOf(templateWith([](json& f) { f["state"] = 9; })).state, "Unknown");
  EXPECT_EQ(fabricOf(templateWith([](json& f) { f["status"] = 10; })).status, "Timeout");
  EXPECT_EQ(fabricOf(templateWith([](json& f) { f["status"] = 42; })).status, "Error42");
  auto d = nvlinkDomainOf(probe(templateWith([](json& f) { f["status"] = 23; }, 2)));
  ASSERT_TRUE(d.has_value());
  EXPECT_EQ(d->problem, NvlinkDomain::Problem::kFailed);
  EXPECT_EQ(d->problemWords, "the fabric registration of GPU2 completed with an error (NVML status "
                             "InsufficientResources)");
}

TEST(Mnnvl, AMalformedFabricMemberIsRefusedNamingIt) {
  auto fabric = [](json& r) -> json& { return r["nvml"]["gpus"][1]["fabric"]; };
  expectEachRefused(mnnvlFixture("gb200-node.json"), {
      {[&](json& r) { fabric(r) = json::array(); },
       "GPU recording: nvml.gpus[1].fabric: expected an object"},
      {[&](json& r) { fabric(r)["clusterUuid"] = "9277D399-0674-44A9-B64E-D85BB19CE2B0"; },
       "GPU recording: nvml.gpus[1].fabric.clusterUuid: expected a UUID (8-4-4-4-12 lower-case hex digits)"},
      {[&](json& r) { fabric(r).erase("clusterUuid"); },
       "GPU recording: nvml.gpus[1].fabric.clusterUuid: expected a UUID (8-4-4-4-12 lower-case hex digits)"},
      {[&](json& r) { fabric(r)["state"] = 256; },
       "GPU recording: nvml.gpus[1].fabric.state: expected an integer from 0 to 255"},
      {[&](json& r) { fabric(r).erase("state"); },
       "GPU recording: nvml.gpus[1].fabric.state: expected NVML's fabric state"},
      {[&](json& r) { fabric(r)["cliqueId"] = -1; },
       "GPU recording: nvml.gpus[1].fabric.cliqueId: expected an integer from 0 to 4294967295"},
      {[&](json& r) { fabric(r).erase("status"); },
       "GPU recording: nvml.gpus[1].fabric.status: expected NVML's return code (0: success)"},
      {[&](json& r) { fabric(r)["healthMask"] = "healthy"; },
       "GPU recording: nvml.gpus[1].fabric.healthMask: expected an integer"},
  });
}

TEST(Mnnvl, FabricUuidsAsTextAndBack) {
  std::array<unsigned char, 16> bytes{0x92, 0x77, 0xd3, 0x99, 0x06, 0x74, 0x44, 0xa9,
                                      0xb6, 0x4e, 0xd8, 0x5b, 0xb1, 0x9c, 0xe2, 0xb0};
  EXPECT_EQ(uuidText(bytes), "9277d399-0674-44a9-b64e-d85bb19ce2b0");
  EXPECT_EQ(uuidBytes("9277d399-0674-44a9-b64e-d85bb19ce2b0"), bytes);
  EXPECT_FALSE(uuidBytes("9277d399-0674-44a9-b64e-d85bb19ce2b").has_value());
  EXPECT_FALSE(uuidBytes("9277d399x0674-44a9-b64e-d85bb19ce2b0").has_value());
}

// ---- the racks judged by the operator ---------------------------------------------

// Each node of the rack as the operator judges its report under a policy that requires a
// domain: its Validated reason and its podshaper.io/nvlink-domain label ("" without).
std::map<std::string, std::pair<std::string, std::string>> judgedRack(const std::string& rack) {
  Policy mnnvl{.name = "mnnvl"};
  mnnvl.requirements.requireNVLinkDomain = true;
  const long long now = 1795305600;
  std::map<std::string, std::pair<std::string, std::string>> out;
  for (const RackNode& n : rackNodes(rack)) {
    Node node{.name = n.name, .uid = "uid-" + n.name, .allocatableGpus = 4};
    Verdict v = judge(reportSpec(probe(n.recording), formatTime(now - 30)), &node, {mnnvl}, now);
    auto labels = nodeLabels(v);
    out[n.name] = {v.condition(conditions::kValidated)->reason, labels[std::string(names::kNvlinkDomain)]};
  }
  return out;
}

TEST(Mnnvl, TheOperatorLabelsEachRackNodeWithItsDomainAndJudgesItsFabric) {
  for (const auto& [name, judged] : judgedRack("one-clique")) {
    EXPECT_EQ(judged, std::make_pair(std::string("RequirementsMet"),
                                     std::string("9277d399-0674-44a9-b64e-d85bb19ce2b0.32766")))
        << name;
  }
  std::map<std::string, int> byLabel;
  for (const auto& [name, judged] : judgedRack("two-cliques")) {
    EXPECT_EQ(judged.first, "RequirementsMet") << name;
    ++byLabel[judged.second];
  }
  EXPECT_EQ(byLabel, (std::map<std::string, int>{{"5d0c51c2-1b7e-4f4e-9a57-3c2f1e0b8a61.1", 9},
                                                 {"5d0c51c2-1b7e-4f4e-9a57-3c2f1e0b8a61.2", 9}}));
  auto inProgress = judgedRack("in-progress");
  EXPECT_EQ(inProgress["in-progress-15"].first, "RequirementsMet");
  EXPECT_EQ(inProgress["in-progress-16"].first, "FabricInProgress");
  EXPECT_EQ(inProgress["in-progress-17"].first, "FabricInProgress");
  EXPECT_EQ(inProgress["in-progress-17"].second, "0f3e7a2b-66c1-4b0d-8e2f-9a4c1d5e7b30.32766");  // kept off by validated=false
  auto unhealthy = judgedRack("unhealthy");
  EXPECT_EQ(unhealthy["unhealthy-05"].first, "FabricUnhealthy");
  EXPECT_EQ(unhealthy["unhealthy-04"].first, "RequirementsMet");
}

// The "in-progress" rack's nodes 16 and 17 already have their UUID; a node just rebooted has
// all zeros until registered (NVML's usual answer): judged by its registration all the same.
TEST(Mnnvl, ANodeRegisteringWithAnAllZeroUuidIsNotValidatedAndUnlabelled) {
  json rec = mnnvlFixture("gb200-node.json");
  for (json& gpu : rec["nvml"]["gpus"]) {
    gpu["fabric"]["clusterUuid"] = "00000000-0000-0000-0000-000000000000";
    gpu["fabric"]["cliqueId"] = 0;
    gpu["fabric"]["state"] = 2;
    gpu["fabric"]["healthMask"] = 0;  // nothing supported yet
  }
  Topology topo = probe(rec);
  ASSERT_TRUE(topo.gpus[0].fabric.has_value());
  EXPECT_EQ(topo.gpus[0].fabric->state, "InProgress");
  auto d = nvlinkDomainOf(topo);
  ASSERT_TRUE(d.has_value());
  EXPECT_EQ(d->id, "");
  EXPECT_EQ(d->sentence(), "NVLink domain unknown (all-zero cluster UUID): fabric in progress, health not reported");
  Node node{.name = "rebooted", .uid = "uid", .allocatableGpus = 4};
  const long long now = 1795305600;
  Verdict v = judge(reportSpec(topo, formatTime(now - 30)), &node, {Policy{.name = "lax"}}, now);
  EXPECT_EQ(v.condition(conditions::kValidated)->reason, "FabricInProgress");
  ASSERT_NE(v.condition(conditions::kNVLinkDomain), nullptr);
  EXPECT_EQ(v.condition(conditions::kNVLinkDomain)->status, "False");
  EXPECT_FALSE(nodeLabels(v).contains(std::string(names::kNvlinkDomain)));
}

TEST(Mnnvl, TheMachinesRecordedHereFailAPolicyRequiringADomain) {
  Policy mnnvl{.name = "mnnvl"};
  mnnvl.requirements.requireNVLinkDomain = true;
  std::ifstream in(std::filesystem::path(PODSHAPER_HARDWARE_DIR) / "h100-x2" / "gpu-recording.json");
  Topology topo = probe(json::parse(in));
  Node node{.name = "h100", .uid = "uid", .allocatableGpus = topo.gpus.size()};
  const long long now = 1795305600;
  Verdict v = judge(reportSpec(topo, formatTime(now - 30)), &node, {mnnvl}, now);
  EXPECT_EQ(v.condition(conditions::kValidated)->reason, "NoNVLinkDomain");
  EXPECT_EQ(v.condition(conditions::kNVLinkDomain), nullptr);
  EXPECT_FALSE(nodeLabels(v).contains(std::string(names::kNvlinkDomain)));
}

}  // namespace
}  // namespace podshaper::agent
