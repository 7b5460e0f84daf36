#include "api/topology.h"

#include <gtest/gtest.h>

#include <fstream>
#include <sstream>

namespace podshaper {
namespace {

std::string fixture(const std::string& name) {
  std::ifstream in(std::string(PODSHAPER_FIXTURES_DIR) + "/" + (name.find('/') == std::string::npos ? "topologies/" : "") + name);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

struct FixtureCase {
  const char* file;
  int gpus;
  const char* link;  // every pair's link in these fixtures
  int nvlinks;
  const char* cpuAffinityOfGpu0;
};

class Fixtures : public testing::TestWithParam<FixtureCase> {};

TEST_P(Fixtures, ParseLikeNvidiaSmiPrintsThem) {
  const auto& c = GetParam();
  auto topo = parseNvidiaSmiTopology(fixture(c.file));
  ASSERT_TRUE(topo.ok()) << topo.error().message;
  ASSERT_EQ(static_cast<int>(topo->gpus.size()), c.gpus);
  EXPECT_EQ(topo->pairs.size(), static_cast<std::size_t>(c.gpus * (c.gpus - 1) / 2));
  for (const auto& p : topo->pairs) {
    EXPECT_LT(p.a, p.b);
    EXPECT_EQ(p.link, c.link);
    EXPECT_EQ(p.nvlinks, c.nvlinks);
    EXPECT_EQ(p.p2p.read, "U");  // no -p2p r matrix in these captures
  }
  EXPECT_EQ(topo->gpus[0].cpuAffinity, c.cpuAffinityOfGpu0);
  EXPECT_EQ(topo->gpus[0].numaNode, 0);
}

INSTANTIATE_TEST_SUITE_P(
    Seed, Fixtures,
    testing::Values(FixtureCase{"p5.48xlarge-8xH100-nv18.topo-m.txt", 8, "NV18", 18, "0-47,96-143"},
                    FixtureCase{"p4d.24xlarge-8xA100-nv12.topo-m.txt", 8, "NV12", 12, "0-23,48-71"},
                    FixtureCase{"g6e.12xlarge-4xL40S-pcie-node.topo-m.txt", 4, "NODE", 0, "0-47"}));

// Captured on the 2×H200 device machine: nvidia-smi topo -m then topo -p2p r, with
// nvidia-smi's ANSI underline escapes.
TEST(Topology, RealCaptureWithP2PMatrix) {
  auto topo = parseNvidiaSmiTopology(fixture("captures/h200x2-nv18.topo-m-and-p2p-r.txt"));
  ASSERT_TRUE(topo.ok()) << topo.error().message;
  ASSERT_EQ(topo->gpus.size(), 2u);
  ASSERT_EQ(topo->pairs.size(), 1u);
  EXPECT_EQ(topo->pairs[0].link, "NV18");
  EXPECT_EQ(topo->pairs[0].nvlinks, 18);
  EXPECT_EQ(topo->pairs[0].p2p.read, "OK");
  EXPECT_EQ(topo->gpus[1].cpuAffinity, "0-31");
  EXPECT_EQ(topo->gpus[1].numaNode, 0);
  EXPECT_NE(renderTopologyTable(*topo).find("verdict: 2 GPUs, 1/1 pairs over NVLink, P2P between all pairs"),
            std::string::npos);
}

// Captured on the 4×H200 device machine (NVSwitch: NV18 between every pair).
TEST(Topology, RealCaptureFourGpusAllNvLink) {
  auto topo = parseNvidiaSmiTopology(fixture("captures/h200x4-nv18.topo-m-and-p2p-r.txt"));
  ASSERT_TRUE(topo.ok()) << topo.error().message;
  ASSERT_EQ(topo->gpus.size(), 4u);
  ASSERT_EQ(topo->pairs.size(), 6u);
  for (const auto& p : topo->pairs) {
    EXPECT_EQ(p.link, "NV18");
    EXPECT_EQ(p.p2p.read, "OK");
  }
  EXPECT_EQ(topo->gpus[3].cpuAffinity, "0-63");
  EXPECT_NE(renderTopologyTable(*topo).find("verdict: 4 GPUs, 6/6 pairs over NVLink, P2P between all pairs"),
            std::string::npos);
}

// A 4-GPU PCIe box across two sockets, with NICs, ANSI colour and a P2P read matrix.
constexpr const char* kMixed =
    "\x1b[4m\tGPU0\tGPU1\tGPU2\tGPU3\tNIC0\tCPU Affinity\tNUMA Affinity\tGPU NUMA ID\x1b[0m\n"
    "GPU0\t X \tPIX\tSYS\tSYS\tNODE\t0-15\t0\t\tN/A\n"
    "GPU1\tPIX\t X \tSYS\tSYS\tNODE\t0-15\t0\t\tN/A\n"
    "GPU2\tSYS\tSYS\t X \tNV4\tSYS\t16-31\t1\t\tN/A\n"
    "GPU3\tSYS\tSYS\tNV4\t X \tSYS\t16-31\t1\t\tN/A\n"
    "NIC0\tNODE\tNODE\tSYS\tSYS\t X \n\n"
    "Legend:\n\n  X    = Self\n  SYS  = Connection traversing PCIe as well as the SMP interconnect\n\n"
    "NIC Legend:\n\n  NIC0: mlx5_0\n\n"
    " \tGPU0\tGPU1\tGPU2\tGPU3\t\n"
    " GPU0\tX\tOK\tNS\tNS\t\n"
    " GPU1\tOK\tX\tNS\tNS\t\n"
    " GPU2\tNS\tNS\tX\tOK\t\n"
    " GPU3\tNS\tNS\tOK\tX\t\n\n"
    "Legend:\n\n  X    = Self\n  OK   = Status Ok\n  NS   = Not supported\n";

TEST(Topology, SysAndNsPairsWithNicsAndAP2PMatrix) {
  auto topo = parseNvidiaSmiTopology(kMixed);
  ASSERT_TRUE(topo.ok()) << topo.error().message;
  ASSERT_EQ(topo->gpus.size(), 4u);
  EXPECT_EQ(topo->gpus[2].numaNode, 1);
  EXPECT_EQ(topo->gpus[3].cpuAffinity, "16-31");
  ASSERT_EQ(topo->pairs.size(), 6u);
  const GpuPair& p01 = topo->pairs[0];
  EXPECT_EQ(p01.link, "PIX");
  EXPECT_EQ(p01.pcie, "PIX");
  EXPECT_EQ(p01.p2p.read, "OK");
  const GpuPair& p02 = topo->pairs[1];
  EXPECT_EQ(p02.link, "SYS");
  EXPECT_EQ(p02.p2p.read, "NS");
  const GpuPair& p23 = topo->pairs[5];
  EXPECT_EQ(p23.link, "NV4");
  EXPECT_EQ(p23.nvlinks, 4);
  EXPECT_EQ(p23.pcie, "");  // topo -m hides the PCIe path under NVLink
  EXPECT_EQ(p23.p2p.read, "OK");

  auto j = toJson(*topo);
  EXPECT_EQ(j["pairs"][5]["link"], "NV4");
  EXPECT_TRUE(j["pairs"][5]["pcie"].is_null());
  EXPECT_EQ(j["pairs"][1]["p2p"]["read"], "NS");
  EXPECT_TRUE(j["host"]["memlockBytes"].is_null());
  EXPECT_EQ(j["gpus"][2]["numaNode"], 1);
}

TEST(Topology, BadCapturesAreClearErrors) {
  struct Case {
    std::string text;
    std::string error;
  };
  for (const auto& c : std::vector<Case>{
           {"", "no nvidia-smi matrix"},
           {"No devices were found\n", "no nvidia-smi matrix"},
           {"\tGPU0\tGPU1\tCPU Affinity\nGPU0\t X \tNV4\t0-1\n", "2 GPU columns but 1 GPU rows"},
           {"\tGPU0\tGPU1\tCPU Affinity\nGPU0\t X \tNV4\t0-1\nGPU1\tPIX\t X \t0-1\n", "NV4 one way and PIX the other"},
           {"\tGPU0\tGPU1\tCPU Affinity\nGPU0\t X \tFAST\t0-1\nGPU1\tFAST\t X \t0-1\n", "\"FAST\" is not a link class"},
           {"\tGPU0\tGPU1\tCPU Affinity\nGPU0\tNV2\t X \t0-1\nGPU1\tNV2\t X \t0-1\n", "on the diagonal"},
           {"\tGPU0\tGPU1\tCPU Affinity\nGPU0\t X\nGPU1\tPIX\t X \t0-1\n", "has 1 cells"},
           {"\tGPU0\tGPU1\tCPU Affinity\nGPU0\t X \tPIX\t0-1\nGPU1\tPIX\t X \t0-1\n\tGPU0\tGPU1\nGPU0\tX\tMAYBE\nGPU1\tOK\tX\n",
            "no status for GPU0/GPU1"}}) {
    auto topo = parseNvidiaSmiTopology(c.text);
    ASSERT_FALSE(topo.ok()) << c.text;
    EXPECT_NE(topo.error().message.find(c.error), std::string::npos) << topo.error().message;
  }
}

TEST(Topology, TheMemlockProbeRoundTripsAndIsOptional) {
  Topology t;
  t.host.memlockBytes = 8ULL << 20;
  EXPECT_FALSE(toJson(t)["host"].contains("memlockProbe"));
  EXPECT_FALSE(topologyFromJson(toJson(t))->host.memlockProbe);
  t.host.memlockProbe = MemlockProbe{MemlockLimit{}, false, "error setting rlimit type 8: operation not permitted"};
  auto j = toJson(t);
  EXPECT_EQ(j["host"]["memlockProbe"], nlohmann::json::parse(R"({"requested":"unlimited","granted":false,
            "message":"error setting rlimit type 8: operation not permitted"})"));
  auto back = topologyFromJson(j);
  ASSERT_TRUE(back) << back.error().message;
  EXPECT_EQ(back->host.memlockProbe, t.host.memlockProbe);
  t.host.memlockProbe = MemlockProbe{MemlockLimit{4194304}, true, ""};
  EXPECT_EQ(toJson(t)["host"]["memlockProbe"]["requested"], "4194304");
  EXPECT_EQ(topologyFromJson(toJson(t))->host.memlockProbe, t.host.memlockProbe);
}

TEST(Topology, ABadMemlockProbeNamesTheField) {
  struct Case {
    const char* probe;
    const char* error;
  };
  for (const auto& c : std::vector<Case>{
           {R"("yes")", "spec.host.memlockProbe: expected an object"},
           {R"({"granted": true})", "spec.host.memlockProbe.requested: \"\" is neither unlimited"},
           {R"({"requested": "4Mi", "granted": true})", ""},
           {R"({"requested": "lots", "granted": true})", "spec.host.memlockProbe.requested: \"lots\""},
           {R"({"requested": "unlimited"})", "spec.host.memlockProbe.granted: expected true or false"},
           {R"({"requested": "unlimited", "granted": "no"})", "spec.host.memlockProbe.granted"}}) {
    nlohmann::json spec = toJson(Topology{});
    spec["host"]["memlockProbe"] = nlohmann::json::parse(c.probe);
    auto t = topologyFromJson(spec);
    if (std::string(c.error).empty()) {
      EXPECT_TRUE(t) << c.probe;
      continue;
    }
    ASSERT_FALSE(t) << c.probe;
    EXPECT_NE(t.error().message.find(c.error), std::string::npos) << t.error().message;
  }
}

// ---- multi-node NVLink ---------------------------------------------------------

constexpr const char* kCluster = "9277d399-0674-44a9-b64e-d85bb19ce2b0";

// n GPUs in clique 32766 of kCluster, completed and healthy (every health field "false").
Topology fabricNode(int n = 4) {
  Topology t;
  for (int i = 0; i < n; ++i) {
    GpuInfo gpu;
    gpu.index = i;
    gpu.fabric = GpuFabric{kCluster, 32766, "Completed", "Success", 0xAA};
    t.gpus.push_back(gpu);
  }
  return t;
}

TEST(NvlinkDomain, TheFabricRoundTripsAndIsLeftOutWhereThereIsNone) {
  Topology t = fabricNode(2);
  t.gpus[1].fabric.reset();
  auto j = toJson(t);
  EXPECT_EQ(j["gpus"][0]["fabric"], nlohmann::json::parse(R"({"clusterUuid": "9277d399-0674-44a9-b64e-d85bb19ce2b0",
            "cliqueId": 32766, "state": "Completed", "status": "Success", "healthMask": 170})"));
  EXPECT_FALSE(j["gpus"][1].contains("fabric"));
  auto back = topologyFromJson(j);
  ASSERT_TRUE(back) << back.error().message;
  EXPECT_EQ(back->gpus[0].fabric, t.gpus[0].fabric);
  EXPECT_FALSE(back->gpus[1].fabric);
  j["gpus"][0]["fabric"]["healthMask"] = nullptr;
  EXPECT_FALSE(topologyFromJson(j)->gpus[0].fabric->healthMask);
}

TEST(NvlinkDomain, ABadFabricNamesTheField) {
  struct Case {
    const char* key;
    nlohmann::json value;
    const char* error;
  };
  for (const auto& c : std::vector<Case>{
           {"clusterUuid", "9277d399", "spec.gpus[0].fabric.clusterUuid: expected a UUID"},
           {"cliqueId", -1, "spec.gpus[0].fabric.cliqueId: expected an integer from 0 to 4294967295"},
           {"cliqueId", 1ULL << 32, "spec.gpus[0].fabric.cliqueId: expected an integer"},
           {"state", "Done", "spec.gpus[0].fabric.state: expected NotStarted, InProgress, Completed or Unknown"},
           {"status", "", "spec.gpus[0].fabric.status: expected NVML's status"},
           {"healthMask", "ok", "spec.gpus[0].fabric.healthMask: expected an integer from 0 to 4294967295, or null"}}) {
    nlohmann::json spec = toJson(fabricNode(1));
    spec["gpus"][0]["fabric"][c.key] = c.value;
    auto t = topologyFromJson(spec);
    ASSERT_FALSE(t) << c.key;
    EXPECT_NE(t.error().message.find(c.error), std::string::npos) << t.error().message;
  }
  nlohmann::json spec = toJson(fabricNode(1));
  spec["gpus"][0]["fabric"] = "yes";
  ASSERT_FALSE(topologyFromJson(spec));
  EXPECT_EQ(topologyFromJson(spec).error().message, "spec.gpus[0].fabric: expected an object");
}

TEST(NvlinkDomain, ANodeWithoutFabricOrWithAnAllZeroUuidHasNone) {
  EXPECT_FALSE(nvlinkDomainOf(Topology{}));
  Topology t = fabricNode();
  for (auto& gpu : t.gpus) gpu.fabric.reset();
  EXPECT_FALSE(nvlinkDomainOf(t));
  t = fabricNode();
  for (auto& gpu : t.gpus) gpu.fabric->clusterUuid = "00000000-0000-0000-0000-000000000000";
  EXPECT_FALSE(nvlinkDomainOf(t));
}

TEST(NvlinkDomain, GpusInOtherDomainsOrWithoutOneAreMixed) {
  Topology t = fabricNode();
  t.gpus[2].fabric->cliqueId = 7;
  t.gpus[3].fabric->cliqueId = 7;
  auto d = nvlinkDomainOf(t);
  ASSERT_TRUE(d);
  EXPECT_EQ(d->id, std::string(kCluster) + ".32766");  // a tie: the first GPU's
  EXPECT_EQ(d->problem, NvlinkDomain::Problem::kMixed);
  EXPECT_EQ(d->sentence(), "NVLink domain 9277d399-0674-44a9-b64e-d85bb19ce2b0.32766: 2 of 4 GPUs here, fabric "
                           "completed, healthy; GPU2 and GPU3 are in NVLink domain "
                           "9277d399-0674-44a9-b64e-d85bb19ce2b0.7");
  t = fabricNode();
  t.gpus[0].fabric.reset();
  t.gpus[1].fabric->clusterUuid = "00000000-0000-0000-0000-000000000000";
  d = nvlinkDomainOf(t);
  ASSERT_TRUE(d);
  EXPECT_EQ(d->gpus, 2);
  EXPECT_EQ(d->problemWords, "GPU0 reports no fabric; GPU1 is in no multi-node NVLink domain (an all-zero cluster "
                             "UUID)");
}

TEST(NvlinkDomain, RegistrationNotDoneComesBeforeHealth) {
  Topology t = fabricNode();
  t.gpus[1].fabric->state = "NotStarted";
  t.gpus[2].fabric->state = "InProgress";
  t.gpus[3].fabric->healthMask = (0xAAu & ~0x30u) | 0x10u;  // route unhealthy
  auto d = nvlinkDomainOf(t);
  ASSERT_TRUE(d);
  EXPECT_EQ(d->problem, NvlinkDomain::Problem::kNotStarted);
  EXPECT_EQ(d->state, "not started");
  EXPECT_EQ(d->sentence(), "NVLink domain 9277d399-0674-44a9-b64e-d85bb19ce2b0.32766: 4 GPUs here, fabric not "
                           "started, unhealthy (GPU3: route unhealthy)");
  // In progress with the UUID not known yet: still the domain of the others, not a mixed node.
  t = fabricNode();
  t.gpus[0].fabric->state = "InProgress";
  t.gpus[0].fabric->clusterUuid = "00000000-0000-0000-0000-000000000000";
  d = nvlinkDomainOf(t);
  ASSERT_TRUE(d);
  EXPECT_EQ(d->problem, NvlinkDomain::Problem::kInProgress);
}

// NVML's usual answer until registration completes: an all-zero UUID. No domain id yet, but
// the registration is the problem, not "no fabric".
TEST(NvlinkDomain, GpusRegisteringWithAnAllZeroUuidAreADomainNotKnownYet) {
  struct Case {
    std::string state, status;
    NvlinkDomain::Problem problem;
    std::string sentence, words;
  };
  for (const Case& c : std::vector<Case>{
           {"NotStarted", "Success", NvlinkDomain::Problem::kNotStarted,
            "NVLink domain unknown (all-zero cluster UUID): fabric not started, healthy",
            "the fabric registration of GPU0, GPU1, GPU2 and GPU3 has not started; NCCL uses multi-node NVLink only "
            "once every GPU's registration completed"},
           {"InProgress", "Success", NvlinkDomain::Problem::kInProgress,
            "NVLink domain unknown (all-zero cluster UUID): fabric in progress, healthy",
            "the fabric registration of GPU0, GPU1, GPU2 and GPU3 is in progress; NCCL uses multi-node NVLink only "
            "once every GPU's registration completed"},
           {"Completed", "Timeout", NvlinkDomain::Problem::kFailed,
            "NVLink domain unknown (all-zero cluster UUID): fabric failed, healthy",
            "the fabric registration of GPU0, GPU1, GPU2 and GPU3 completed with an error (NVML status Timeout)"}}) {
    SCOPED_TRACE(c.state + " " + c.status);
    Topology t = fabricNode();
    for (auto& gpu : t.gpus) {
      gpu.fabric->clusterUuid = "00000000-0000-0000-0000-000000000000";
      gpu.fabric->cliqueId = 0;
      gpu.fabric->state = c.state;
      gpu.fabric->status = c.status;
    }
    auto d = nvlinkDomainOf(t);
    ASSERT_TRUE(d);
    EXPECT_EQ(d->id, "");
    EXPECT_EQ(d->gpus, 0);
    EXPECT_FALSE(d->completed);
    EXPECT_EQ(d->problem, c.problem);
    EXPECT_EQ(d->sentence(), c.sentence);
    EXPECT_EQ(d->problemWords, c.words);
  }
  // One GPU registering, the others completed with zeros or without fabric: the registration.
  Topology t = fabricNode();
  for (auto& gpu : t.gpus) gpu.fabric->clusterUuid = "00000000-0000-0000-0000-000000000000";
  t.gpus[3].fabric.reset();
  t.gpus[2].fabric->state = "InProgress";
  auto d = nvlinkDomainOf(t);
  ASSERT_TRUE(d);
  EXPECT_EQ(d->id, "");
  EXPECT_EQ(d->problem, NvlinkDomain::Problem::kInProgress);
  EXPECT_EQ(d->problemWords, "the fabric registration of GPU2 is in progress; NCCL uses multi-node NVLink only once "
                             "every GPU's registration completed");
  // Completed with success and all zeros is NVLink within the node, whatever the health says.
  t.gpus[2].fabric->state = "Completed";
  t.gpus[2].fabric->healthMask = 0xA9;
  EXPECT_FALSE(nvlinkDomainOf(t));
}

TEST(NvlinkDomain, AHealthMaskOfZerosIsHealthNotReported) {
  Topology t = fabricNode();
  for (auto& gpu : t.gpus) gpu.fabric->healthMask = 0;  // every field 0: not supported
  auto d = nvlinkDomainOf(t);
  ASSERT_TRUE(d);
  EXPECT_FALSE(d->healthKnown);
  EXPECT_EQ(d->problem, NvlinkDomain::Problem::kNone);
  EXPECT_EQ(d->sentence(), "NVLink domain 9277d399-0674-44a9-b64e-d85bb19ce2b0.32766: 4 GPUs here, fabric completed, "
                           "health not reported");
  // Every field 2 ("false"), the configuration 0 or 1: reported, and healthy.
  for (uint32_t mask : {0xAAu, 0x1AAu}) {
    for (auto& gpu : t.gpus) gpu.fabric->healthMask = mask;
    d = nvlinkDomainOf(t);
    ASSERT_TRUE(d);
    EXPECT_TRUE(d->healthKnown) << mask;
    EXPECT_NE(d->sentence().find("fabric completed, healthy"), std::string::npos) << d->sentence();
  }
  // One GPU's mask of zeros beside another's fault: the fault is said.
  t.gpus[0].fabric->healthMask = 0;
  t.gpus[1].fabric->healthMask = 0xA9;
  d = nvlinkDomainOf(t);
  ASSERT_TRUE(d);
  EXPECT_TRUE(d->healthKnown);
  EXPECT_EQ(d->problem, NvlinkDomain::Problem::kUnhealthy);
  EXPECT_EQ(d->faults, "GPU1: degraded bandwidth");
}

TEST(NvlinkDomain, EachHealthFaultInWords) {
  EXPECT_TRUE(fabricFaults(0).empty());      // nothing supported
  EXPECT_TRUE(fabricFaults(0x1AA).empty());  // every field false, configuration: none
  EXPECT_EQ(fabricFaults(0x55), (std::vector<std::string>{"degraded bandwidth", "route recovery in progress",
                                                          "route unhealthy", "access timeout recovery in progress"}));
  EXPECT_EQ(fabricFaults(0x2AA), (std::vector<std::string>{"incorrect configuration (incorrect system GUID)"}));
  EXPECT_EQ(fabricFaults(0x5AA), (std::vector<std::string>{"incorrect configuration (too few NVLinks)"}));
  EXPECT_EQ(fabricFaults(0x9AA), (std::vector<std::string>{"incorrect configuration (code 9)"}));
}

TEST(NvlinkDomain, TheProbeTableSaysTheDomain) {
  Topology t = fabricNode(2);
  t.pairs.push_back(GpuPair{0, 1, "NV18", 18, "SYS", {"OK", "OK", "OK"}, true, std::nullopt});
  std::string table = renderTopologyTable(t);
  EXPECT_NE(table.find("verdict: 2 GPUs, 1/1 pairs over NVLink, P2P between all pairs\nNVLink domain "
                       "9277d399-0674-44a9-b64e-d85bb19ce2b0.32766: 2 GPUs here, fabric completed, healthy\n"),
            std::string::npos)
      << table;
  t.gpus[1].fabric->state = "InProgress";
  EXPECT_NE(renderTopologyTable(t).find("fabric in progress, healthy\n  the fabric registration of GPU1 is in progress"),
            std::string::npos);
  // Registering with all-zero UUIDs, health masks of zeros: said, not left out.
  for (auto& gpu : t.gpus) {
    gpu.fabric->clusterUuid = "00000000-0000-0000-0000-000000000000";
    gpu.fabric->healthMask = 0;
  }
  EXPECT_NE(renderTopologyTable(t).find("NVLink domain unknown (all-zero cluster UUID): fabric in progress, health "
                                        "not reported\n  the fabric registration of GPU1 is in progress"),
            std::string::npos)
      << renderTopologyTable(t);
  for (auto& gpu : t.gpus) gpu.fabric.reset();
  EXPECT_EQ(renderTopologyTable(t).find("NVLink domain"), std::string::npos);
}

}  // namespace
}  // namespace podshaper
