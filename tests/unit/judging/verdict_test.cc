#include "judging/verdict.h"

#include <gtest/gtest.h>

#include <fstream>
#include <functional>
#include <sstream>

#include "judging/report_status.h"
#include "tests/unit/judging/verdict_builder.h"

namespace podshaper {
namespace {

TEST(Verdict, AHealthyNVLinkNodeIsValidated) {
  Node node = gpuNode(8);
  Verdict v = judge(TopologyBuilder(8).spec(), &node, {defaultPolicy()}, kNow);
  EXPECT_TRUE(v.validated);
  EXPECT_EQ(v.gpus, 8);
  EXPECT_EQ(v.interconnect, "nvlink");
  EXPECT_EQ(v.p2p, "all");
  EXPECT_EQ(v.memlock, "unlimited");
  EXPECT_EQ(v.policies, std::vector<std::string>{"default"});
  ASSERT_EQ(v.conditions.size(), 5u);
  for (const auto& c : v.conditions) EXPECT_EQ(c.status, "True") << c.type << ": " << c.message;
  EXPECT_EQ(v.condition("Validated")->reason, "RequirementsMet");
  EXPECT_EQ(v.staleAt, kNow - 30 + 600 + 1);
  EXPECT_FALSE(v.taintEffect);
  auto labels = nodeLabels(v);
  EXPECT_EQ(labels["podshaper.io/topology-validated"], "true");
  EXPECT_EQ(labels["podshaper.io/gpu-count"], "8");
  EXPECT_EQ(labels["podshaper.io/interconnect"], "nvlink");
  EXPECT_EQ(labels["podshaper.io/p2p"], "all");
  EXPECT_EQ(labels["podshaper.io/memlock"], "unlimited");
}

TEST(Verdict, PairsWithoutP2PAreNamedAndNCCLExplained) {
  Node node = gpuNode(4);
  json spec = TopologyBuilder(4).link("PXB").pair(0, 2, "SYS", "NS").pair(1, 3, "SYS", "NS").spec();
  Verdict v = judge(spec, &node, {defaultPolicy()}, kNow);
  EXPECT_FALSE(v.validated);
  EXPECT_EQ(v.p2p, "partial");
  EXPECT_EQ(v.interconnect, "pcie");
  const Condition* p2p = v.condition("P2PComplete");
  EXPECT_EQ(p2p->status, "False");
  EXPECT_EQ(p2p->reason, "P2PUnavailable");
  EXPECT_NE(p2p->message.find("2 of 6 GPU pairs"), std::string::npos) << p2p->message;
  EXPECT_NE(p2p->message.find("GPU0-GPU2 and GPU1-GPU3"), std::string::npos) << p2p->message;
  EXPECT_NE(p2p->message.find("NCCL falls back to shared memory (/dev/shm)"), std::string::npos);
  EXPECT_NE(p2p->message.find("with the SHM-transport NCCL /dev/shm reserve"), std::string::npos);
  const Condition* validated = v.condition("Validated");
  EXPECT_EQ(validated->reason, "P2PUnavailable");
  EXPECT_NE(validated->message.find("does not meet TopologyPolicy default"), std::string::npos);
  EXPECT_EQ(nodeLabels(v)["podshaper.io/topology-validated"], "false");
}

TEST(Verdict, NoP2PAnywhere) {
  Node node = gpuNode(2);
  Verdict v = judge(TopologyBuilder(2).link("SYS").p2p("NS").spec(), &node, {defaultPolicy()}, kNow);
  EXPECT_EQ(v.p2p, "none");
}

TEST(Verdict, UnmeasuredP2PIsUnknownNotAPass) {
  Node node = gpuNode(8);
  Verdict v = judge(TopologyBuilder(8).p2p("U").spec(), &node, {defaultPolicy()}, kNow);
  EXPECT_EQ(v.p2p, "unknown");
  EXPECT_EQ(v.condition("P2PComplete")->status, "Unknown");
  EXPECT_EQ(v.condition("Validated")->reason, "P2PNotMeasured");
  EXPECT_FALSE(v.validated);
  // Without the requirement it is a fact, not a failure.
  Policy lax{.name = "lax"};
  EXPECT_TRUE(judge(TopologyBuilder(8).p2p("U").spec(), &node, {lax}, kNow).validated);
}

TEST(Verdict, TheRealCapturesParseAndJudge) {
  std::ifstream in(std::string(PODSHAPER_FIXTURES_DIR) + "/captures/h200x2-nv18.topo-m-and-p2p-r.txt");
  std::stringstream text;
  text << in.rdbuf();
  auto topology = parseNvidiaSmiTopology(text.str());
  ASSERT_TRUE(topology) << topology.error().message;
  Node node = gpuNode(2);
  Verdict v = judge(reportSpec(*topology, formatTime(kNow)), &node, {defaultPolicy()}, kNow);
  EXPECT_EQ(v.interconnect, "nvlink");
  EXPECT_EQ(v.p2p, "all");
}

TEST(Verdict, EachRequirementFailsWithItsReason) {
  struct Case {
    const char* what;
    json spec;
    uint64_t nodeGpus;
    Requirements requirements;
    const char* reason;
    const char* words;
  };
  auto req = [](auto set) {
    Requirements r;
    set(r);
    return r;
  };
  const std::vector<Case> cases = {
      {"too few GPUs", TopologyBuilder(4).spec(), 4, req([](Requirements& r) { r.minGPUs = 8; }), "TooFewGPUs",
       "it has 4 GPUs, fewer than the 8 required"},
      {"slow links", TopologyBuilder(4).link("PHB").spec(), 4,
       req([](Requirements& r) { r.minLink = LinkClass::NVLink; }), "LinkTooSlow", "slower than NVLink (PHB)"},
      {"a link class that is good enough", TopologyBuilder(4).link("PIX").spec(), 4,
       req([](Requirements& r) { r.minLink = LinkClass::PXB; }), "", ""},
      {"bandwidth too low", TopologyBuilder(2).bandwidth(20).spec(), 2,
       req([](Requirements& r) { r.minBandwidthGBps = 300; }), "BandwidthTooLow", "GPU0-GPU1 at 20.0 GB/s"},
      {"bandwidth not measured", TopologyBuilder(2).spec(), 2,
       req([](Requirements& r) { r.minBandwidthGBps = 300; }), "BandwidthNotMeasured", "--measure-bandwidth"},
      {"memlock", TopologyBuilder(2).memlock(8 << 20).spec(), 2,
       req([](Requirements& r) { r.requireMemlockUnlimited = true; }), "MemlockLimited", "only 8 MiB"},
      {"count", TopologyBuilder(8).spec(), 7, Requirements{}, "CountMismatch", "the Node offers 7"},
      {"no device plugin", TopologyBuilder(8).spec(), 0, Requirements{}, "NoGPUsAllocatable", "nvidia.com/gpu"},
      {"stale", TopologyBuilder(2).spec(kNow - 601), 2, Requirements{}, "ReportStale", "older than 10m"},
      {"stale by the policy's age", TopologyBuilder(2).spec(kNow - 61), 2,
       req([](Requirements& r) { r.maxReportAgeSeconds = 60; }), "ReportStale", "older than 1m"},
  };
  for (const auto& c : cases) {
    Node node = gpuNode(c.nodeGpus);
    if (c.nodeGpus == 0) node.allocatableGpus.reset();
    Verdict v = judge(c.spec, &node, {Policy{.name = "p", .requirements = c.requirements}}, kNow);
    const Condition* validated = v.condition("Validated");
    if (std::string(c.reason).empty()) {
      EXPECT_TRUE(v.validated) << c.what << ": " << validated->message;
      continue;
    }
    EXPECT_FALSE(v.validated) << c.what;
    EXPECT_EQ(validated->reason, c.reason) << c.what << ": " << validated->message;
    EXPECT_NE(validated->message.find(c.words), std::string::npos) << c.what << ": " << validated->message;
  }
}

// What `kubectl describe gtr` says of a node whose runtime could not start the
// agent's memlock-probe: the report as the agent writes it, in.
TEST(Verdict, AMemlockNotGrantedIsSaidInPlainWordsAndKeepsPodsOff) {
  const json spec = json::parse(R"({
    "observedAt": "2026-11-21T23:59:30Z",
    "gpus": [{"index": 0, "uuid": "GPU-0", "name": "NVIDIA H100 80GB HBM3", "pciBusId": "00000000:18:00.0",
              "memoryBytes": 85520809984, "numaNode": 0, "cpuAffinity": "0-15"}],
    "pairs": [],
    "host": {"memoryBytes": 270000000000, "memlockBytes": 8388608,
             "memlockProbe": {"requested": "unlimited", "granted": false,
               "message": "failed to create containerd task: failed to create shim task: OCI runtime create failed: runc create failed: unable to start container process: error during container init: error setting rlimit type 8: operation not permitted"},
             "modules": {"nvidia_fs": false, "nvidia_peermem": false}, "driverVersion": "580.159.04", "cudaVersion": "13.0"}
  })");
  Node node = gpuNode(1);
  // Even a policy that asks nothing of memlock: shaped pods could not start here.
  Policy lax{.name = "lax"};
  Verdict v = judge(spec, &node, {lax}, kNow);
  EXPECT_FALSE(v.validated);
  EXPECT_EQ(v.memlock, "not-granted");
  EXPECT_EQ(nodeLabels(v)["podshaper.io/memlock"], "not-granted");
  EXPECT_EQ(nodeLabels(v)["podshaper.io/topology-validated"], "false");
  const Condition* memlock = v.condition("MemlockUnlimited");
  EXPECT_EQ(memlock->status, "False");
  EXPECT_EQ(memlock->reason, "MemlockNotGranted");
  EXPECT_EQ(memlock->message,
            "The container runtime on this node could not start a container with RLIMIT_MEMLOCK=unlimited (the "
            "agent's memlock-probe container, which asks for what the webhook gives training pods): \"failed to "
            "create containerd task: failed to create shim task: OCI runtime create failed: runc create failed: "
            "unable to start container process: error during container init: error setting rlimit type 8: operation "
            "not permitted\". Pods shaped by podshaper ask for the same limit, so they would never start here; they "
            "are kept off this node (label podshaper.io/memlock=not-granted). To fix it, run a container runtime "
            "that may raise the limit (containerd or CRI-O with the NRI ulimit-adjuster plugin and CAP_SYS_RESOURCE, "
            "or a higher LimitMEMLOCK in its systemd unit), or set the webhook's memlock (and the agent's "
            "memlock-probe with it) to what this node can grant.");
  const Condition* validated = v.condition("Validated");
  EXPECT_EQ(validated->reason, "MemlockNotGranted");
  EXPECT_EQ(validated->message,
            "The node does not meet TopologyPolicy lax: the container runtime could not start a container with "
            "RLIMIT_MEMLOCK=unlimited, so pods shaped by podshaper would never start here. Node-exclusive training "
            "pods are not placed here until this is fixed.");

  // The status the operator writes, and its Warnings.
  json status = reportStatus(v, nullptr, 1, kNow);
  EXPECT_EQ(status["memlock"], "not-granted");
  EXPECT_EQ(eventKinds(transitionEvents(nullptr, v)),
            (std::vector<std::string>{"Warning TopologyNotValidated", "Warning MemlockNotGranted"}));
  // Fixed: the probe started and got what it asked.
  json fixed = spec;
  fixed["host"]["memlockProbe"] = {{"requested", "unlimited"}, {"granted", true}, {"message", ""}};
  fixed["host"]["memlockBytes"] = nullptr;
  Verdict good = judge(fixed, &node, {lax}, kNow);
  EXPECT_TRUE(good.validated);
  EXPECT_EQ(good.memlock, "unlimited");
  EXPECT_EQ(eventKinds(transitionEvents(status, good)),
            (std::vector<std::string>{"Normal TopologyValidated", "Normal Unlimited"}));
}

TEST(Verdict, AMemlockQuantityAskedNamesIt) {
  Node node = gpuNode(2);
  Verdict v = judge(TopologyBuilder(2).memlockProbe(MemlockLimit{64ULL << 30}, false, "").spec(), &node, {}, kNow);
  EXPECT_NE(v.condition("MemlockUnlimited")->message.find("RLIMIT_MEMLOCK=64 GiB (the agent's"), std::string::npos)
      << v.condition("MemlockUnlimited")->message;
  EXPECT_NE(v.condition("MemlockUnlimited")->message.find(": it gave no reason."), std::string::npos)
      << v.condition("MemlockUnlimited")->message;
}

TEST(Verdict, AGrantedLimitIsTheLabelInBytes) {
  Node node = gpuNode(2);
  json spec = TopologyBuilder(2).memlock(4 << 20).memlockProbe(MemlockLimit{4 << 20}, true).spec();
  // The webhook asks for 4Mi; the policy leaves memlock to its node affinity.
  Policy p = defaultPolicy();
  p.requirements.requireMemlockUnlimited = false;
  Verdict v = judge(spec, &node, {p}, kNow);
  EXPECT_TRUE(v.validated) << v.condition("Validated")->message;
  EXPECT_EQ(v.memlock, "4194304");
  EXPECT_EQ(nodeLabels(v)["podshaper.io/memlock"], "4194304");
  EXPECT_EQ(v.condition("MemlockUnlimited")->status, "False");
  EXPECT_EQ(v.condition("MemlockUnlimited")->reason, "MemlockLimited");
  // A policy that requires unlimited: today's words.
  Verdict strict = judge(spec, &node, {defaultPolicy()}, kNow);
  EXPECT_FALSE(strict.validated);
  EXPECT_EQ(strict.condition("Validated")->reason, "MemlockLimited");
  EXPECT_NE(strict.condition("Validated")->message.find("containers may lock only 4 MiB of memory, not unlimited"),
            std::string::npos);
}

TEST(Verdict, AllFailuresAreListedTheFirstGivesTheReason) {
  Node node = gpuNode(4);
  json spec = TopologyBuilder(4).p2p("NS").memlock(65536).spec(kNow - 3600);
  Verdict v = judge(spec, &node, {defaultPolicy()}, kNow);
  const Condition* validated = v.condition("Validated");
  EXPECT_EQ(validated->reason, "P2PUnavailable");
  EXPECT_NE(validated->message.find("lack peer-to-peer"), std::string::npos);
  EXPECT_NE(validated->message.find("only 64 KiB"), std::string::npos);
  EXPECT_NE(validated->message.find("older than 10m"), std::string::npos);
  EXPECT_EQ(v.condition("Fresh")->status, "False");
  EXPECT_EQ(v.condition("MemlockUnlimited")->status, "False");
  EXPECT_FALSE(v.staleAt);
}

TEST(Verdict, AReportWithoutItsNodeIsFlagged) {
  Verdict v = judge(TopologyBuilder(8).spec(), nullptr, {defaultPolicy()}, kNow);
  EXPECT_FALSE(v.validated);
  EXPECT_EQ(v.condition("GPUCountMatchesNode")->reason, "NodeNotFound");
  EXPECT_EQ(v.condition("Validated")->reason, "NodeNotFound");
}

TEST(Verdict, NoPolicyIsNotValidated) {
  Node node = gpuNode(8);
  Verdict v = judge(TopologyBuilder(8).spec(), &node, {}, kNow);
  EXPECT_FALSE(v.validated);
  EXPECT_EQ(v.condition("Validated")->reason, "NoPolicy");
  Policy other{.name = "other"};
  other.nodeSelector.matchLabels = {{"pool", "b"}};
  EXPECT_EQ(judge(TopologyBuilder(8).spec(), &node, {other}, kNow).condition("Validated")->reason, "NoPolicy");
}

TEST(Verdict, AnUnreadableReportIsJudgedNotThrown) {
  Node node = gpuNode(8);
  for (json spec : {json(nullptr), json::array(), json{{"gpus", "eight"}}, json{{"pairs", {{{"a", -1}}}}},
                    json{{"gpus", {{{"index", "zero"}}}}}, json{{"pairs", {{{"a", 0}, {"b", 1}}}}}}) {
    Verdict v = judge(spec, &node, {defaultPolicy()}, kNow);
    EXPECT_FALSE(v.validated) << spec.dump();
    EXPECT_EQ(v.condition("Validated")->reason, "ReportUnreadable") << spec.dump();
  }
}

TEST(Verdict, MissingPairsAreNotMeasured) {
  Node node = gpuNode(8);
  json spec = TopologyBuilder(8).spec();
  spec["pairs"].erase(spec["pairs"].begin() + 3, spec["pairs"].end());
  Verdict v = judge(spec, &node, {defaultPolicy()}, kNow);
  EXPECT_FALSE(v.validated);
  EXPECT_EQ(v.p2p, "unknown");
  EXPECT_EQ(v.condition("P2PComplete")->status, "Unknown");
  EXPECT_NE(v.condition("Validated")->message.find("only 3 of 28 GPU pairs"), std::string::npos)
      << v.condition("Validated")->message;
}

TEST(Verdict, GPUCountCases) {
  Node unhealthy = gpuNode(0);  // the device plugin lists nvidia.com/gpu: "0"
  Verdict v = judge(TopologyBuilder(8).spec(), &unhealthy, {}, kNow);
  EXPECT_EQ(v.condition("GPUCountMatchesNode")->reason, "CountMismatch");
  EXPECT_NE(v.condition("GPUCountMatchesNode")->message.find("unhealthy"), std::string::npos);
  Node plain = gpuNode(0);
  plain.allocatableGpus.reset();
  EXPECT_EQ(judge(TopologyBuilder(0).spec(), &plain, {}, kNow).condition("GPUCountMatchesNode")->reason, "NoGPUs");
  EXPECT_EQ(nodeFromJson({{"status", {{"allocatable", {{"nvidia.com/gpu", "0"}}}}}}).allocatableGpus, 0u);
}

TEST(Verdict, PoliciesDoNotSelectByTheLabelsTheVerdictWrites) {
  Policy onValidated{.name = "loop"};
  onValidated.nodeSelector.matchLabels = {{"podshaper.io/topology-validated", "true"}};
  onValidated.requirements.minGPUs = 16;
  Node node = gpuNode(8, {{"podshaper.io/topology-validated", "true"}, {"pool", "a"}});
  Verdict v = judge(TopologyBuilder(8).spec(), &node, {defaultPolicy(), onValidated}, kNow);
  EXPECT_TRUE(v.validated);
  EXPECT_EQ(v.policies, std::vector<std::string>{"default"});
}

TEST(Verdict, MixedAndSingleGPU) {
  Node node = gpuNode(4);
  EXPECT_EQ(judge(TopologyBuilder(4).pair(0, 3, "SYS", "OK").spec(), &node, {}, kNow).interconnect, "mixed");
  Node one = gpuNode(1);
  Verdict v = judge(TopologyBuilder(1).spec(), &one, {defaultPolicy()}, kNow);
  EXPECT_TRUE(v.validated);
  EXPECT_EQ(v.interconnect, "none");
  EXPECT_EQ(v.p2p, "all");
  EXPECT_EQ(v.condition("P2PComplete")->reason, "NoGPUPairs");
}

TEST(Verdict, NodeFromANode) {
  json node = {{"metadata", {{"name", "n"}, {"uid", "u"}, {"labels", {{"a", "b"}}}}},
               {"status", {{"allocatable", {{"nvidia.com/gpu", "8"}}}}}};
  Node f = nodeFromJson(node);
  EXPECT_EQ(f.name, "n");
  EXPECT_EQ(f.uid, "u");
  ASSERT_NE(f.label("a"), nullptr);
  EXPECT_EQ(*f.label("a"), "b");
  EXPECT_EQ(f.allocatableGpus, 8u);
  EXPECT_FALSE(nodeFromJson({{"metadata", {{"name", "cpu"}}}}).allocatableGpus);
}

// ---- multi-node NVLink ---------------------------------------------------------

constexpr const char* kDomain = "9277d399-0674-44a9-b64e-d85bb19ce2b0.32766";

TEST(Verdict, ANodeInACompletedHealthyNVLinkDomainIsLabelledWithIt) {
  Node node = gpuNode(4);
  Verdict v = judge(TopologyBuilder(4).fabric().spec(), &node, {defaultPolicy()}, kNow);
  EXPECT_TRUE(v.validated);
  EXPECT_EQ(v.nvlinkDomain, kDomain);
  ASSERT_EQ(v.conditions.size(), 6u);
  const Condition* c = v.condition("NVLinkDomain");
  ASSERT_NE(c, nullptr);
  EXPECT_EQ(c->status, "True");
  EXPECT_EQ(c->reason, "Completed");
  EXPECT_EQ(c->message, "NVLink domain 9277d399-0674-44a9-b64e-d85bb19ce2b0.32766: 4 GPUs here, fabric completed, "
                        "healthy. Pods placed on nodes labelled podshaper.io/nvlink-domain="
                        "9277d399-0674-44a9-b64e-d85bb19ce2b0.32766 reach each other's GPUs over NVLink.");
  EXPECT_EQ(nodeLabels(v)["podshaper.io/nvlink-domain"], kDomain);
}

TEST(Verdict, ANodeWithoutFabricHasNoDomainConditionNorLabel) {
  Node node = gpuNode(8);
  Verdict v = judge(TopologyBuilder(8).spec(), &node, {defaultPolicy()}, kNow);
  EXPECT_EQ(v.conditions.size(), 5u);
  EXPECT_EQ(v.condition("NVLinkDomain"), nullptr);
  EXPECT_FALSE(v.nvlinkDomain);
  EXPECT_FALSE(nodeLabels(v).contains("podshaper.io/nvlink-domain"));
}

// The node not validated for its fabric: the NVLinkDomain condition False with the reason and
// words containing message, Validated False with the same reason, words containing validated.
void expectNotValidatedBy(const Verdict& v, const std::string& reason, const std::string& message,
                          const std::string& validated) {
  EXPECT_FALSE(v.validated);
  const Condition* domain = v.condition("NVLinkDomain");
  ASSERT_NE(domain, nullptr);
  EXPECT_EQ(domain->status, "False");
  EXPECT_EQ(domain->reason, reason);
  EXPECT_NE(domain->message.find(message), std::string::npos) << domain->message;
  EXPECT_EQ(v.condition("Validated")->reason, reason);
  EXPECT_NE(v.condition("Validated")->message.find(validated), std::string::npos) << v.condition("Validated")->message;
}

TEST(Verdict, AFabricNotCompletedOrUnhealthyIsNotValidatedWhateverThePolicies) {
  struct Case {
    std::function<void(GpuFabric&)> change;
    std::string reason, message, validated;
  };
  const std::vector<Case> cases = {
      {[](GpuFabric& f) { f.state = "InProgress"; }, "FabricInProgress",
       "NVLink domain 9277d399-0674-44a9-b64e-d85bb19ce2b0.32766: 4 GPUs here, fabric in progress, healthy: the "
       "fabric registration of GPU1 is in progress; NCCL uses multi-node NVLink only once every GPU's registration "
       "completed. The node is validated again once the fabric manager has registered every GPU.",
       "NVLink domain 9277d399-0674-44a9-b64e-d85bb19ce2b0.32766: the fabric registration of GPU1 is in progress"},
      {[](GpuFabric& f) { f.state = "NotStarted"; }, "FabricNotStarted", "fabric not started", "has not started"},
      {[](GpuFabric& f) { f.status = "Timeout"; }, "FabricFailed",
       "fabric failed, healthy: the fabric registration of GPU1 completed with an error (NVML status Timeout)",
       "completed with an error"},
      {[](GpuFabric& f) { f.healthMask = 0xA9; }, "FabricUnhealthy",
       "4 GPUs here, fabric completed, unhealthy (GPU1: degraded bandwidth). NVML's fabric health mask names these "
       "faults",
       "NVLink domain 9277d399-0674-44a9-b64e-d85bb19ce2b0.32766: GPU1: degraded bandwidth"},
      {[](GpuFabric& f) { f.cliqueId = 7; }, "FabricMixed",
       "3 of 4 GPUs here, fabric completed, healthy; GPU1 is in NVLink domain "
       "9277d399-0674-44a9-b64e-d85bb19ce2b0.7. Pods placed by one domain label would not all reach each other",
       "GPU1 is in NVLink domain"},
  };
  Node node = gpuNode(4);
  for (const Case& c : cases) {
    SCOPED_TRACE(c.reason);
    Verdict v = judge(TopologyBuilder(4).fabric().gpuFabric(1, c.change).spec(), &node, {Policy{.name = "lax"}}, kNow);
    expectNotValidatedBy(v, c.reason, c.message, c.validated);
    // The domain is a fact of the GPUs even while it cannot be used; GPUs in two are in none.
    EXPECT_EQ(v.nvlinkDomain.has_value(), c.reason != "FabricMixed");
  }
}

// A GB200 node just rebooted: its GPUs registering, their cluster UUID all zeros until done.
// Not validated with the reason, whatever the policies ask, and no label: no domain is known.
TEST(Verdict, AFabricRegisteringWithAllZeroUuidsIsNotValidated) {
  struct Case {
    std::string state, status, reason, message, validated;
  };
  const std::vector<Case> cases = {
      {"InProgress", "Success", "FabricInProgress",
       "NVLink domain unknown (all-zero cluster UUID): fabric in progress, healthy: the fabric registration of GPU0, "
       "GPU1, GPU2 and GPU3 is in progress; NCCL uses multi-node NVLink only once every GPU's registration "
       "completed. The node is validated again once the fabric manager has registered every GPU.",
       ": NVLink domain unknown (all-zero cluster UUID): the fabric registration of GPU0, "
       "GPU1, GPU2 and GPU3 is in progress"},
      {"NotStarted", "Success", "FabricNotStarted", "fabric not started, healthy: the fabric registration of GPU0, "
       "GPU1, GPU2 and GPU3 has not started", "has not started"},
      {"Completed", "Timeout", "FabricFailed", "fabric failed, healthy: the fabric registration of GPU0, GPU1, GPU2 "
       "and GPU3 completed with an error (NVML status Timeout)", "completed with an error"},
  };
  Node node = gpuNode(4);
  for (const Case& c : cases) {
    SCOPED_TRACE(c.reason);
    TopologyBuilder b(4);
    b.fabric();
    for (int i = 0; i < 4; ++i) {
      b.gpuFabric(i, [&](GpuFabric& f) {
        f.clusterUuid = "00000000-0000-0000-0000-000000000000";
        f.cliqueId = 0;
        f.state = c.state;
        f.status = c.status;
      });
    }
    Policy lax{.name = "lax"}, mnnvl = defaultPolicy();
    mnnvl.requirements.requireNVLinkDomain = true;
    for (const Policy& policy : {lax, mnnvl}) {
      Verdict v = judge(b.spec(), &node, {policy}, kNow);
      expectNotValidatedBy(v, c.reason, c.message, c.validated);
      EXPECT_FALSE(v.nvlinkDomain);
      EXPECT_FALSE(nodeLabels(v).contains("podshaper.io/nvlink-domain"));
    }
  }
}

TEST(Verdict, AHealthMaskOfZerosIsNotCalledHealthy) {
  Node node = gpuNode(4);
  TopologyBuilder b(4);
  b.fabric();
  for (int i = 0; i < 4; ++i) b.gpuFabric(i, [](GpuFabric& f) { f.healthMask = 0; });
  Verdict v = judge(b.spec(), &node, {defaultPolicy()}, kNow);
  EXPECT_TRUE(v.validated);
  const Condition* domain = v.condition("NVLinkDomain");
  ASSERT_NE(domain, nullptr);
  EXPECT_EQ(domain->reason, "Completed");
  EXPECT_NE(domain->message.find("4 GPUs here, fabric completed, health not reported. "), std::string::npos)
      << domain->message;
}

TEST(Verdict, APolicyMayRequireAnNVLinkDomain) {
  Policy mnnvl = defaultPolicy();
  mnnvl.requirements.requireNVLinkDomain = true;
  Node node = gpuNode(4);
  EXPECT_TRUE(judge(TopologyBuilder(4).fabric().spec(), &node, {mnnvl}, kNow).validated);
  struct Case {
    std::function<void(TopologyBuilder&)> make;
    std::string why;
  };
  for (const Case& c : std::vector<Case>{
           {[](TopologyBuilder&) {}, "its GPUs are in no multi-node NVLink domain (they report no NVLink fabric)"},
           {[](TopologyBuilder& b) {
              b.fabric();
              for (int i = 0; i < 4; ++i) b.gpuFabric(i, [](GpuFabric& f) { f.clusterUuid = std::string(8, '0') + "-0000-0000-0000-000000000000"; });
            },
            "(their fabric's cluster UUID is all zeros: NVLink within the node only)"}}) {
    TopologyBuilder b(4);
    c.make(b);
    Verdict v = judge(b.spec(), &node, {mnnvl}, kNow);
    EXPECT_FALSE(v.validated);
    EXPECT_EQ(v.condition("Validated")->reason, "NoNVLinkDomain");
    EXPECT_NE(v.condition("Validated")->message.find(c.why), std::string::npos) << v.condition("Validated")->message;
    EXPECT_EQ(v.condition("NVLinkDomain"), nullptr);
  }
}

}  // namespace
}  // namespace podshaper
