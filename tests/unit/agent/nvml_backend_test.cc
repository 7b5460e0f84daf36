// The real backend's code (agent/nvml_backend.cc) on NVML's, CUDA's and sysfs's
// answers without a GPU: replayed from what `podshaper-agent record` wrote on the GPU
// machines (docs/hardware/*/gpu-recording.json) and from recordings made here for
// the shapes those machines lack (NVSwitch, direct-link mixes, older drivers, NUMA
// fallbacks, failures).
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include "agent/backend.h"
#include "agent/gpu_recording.h"
#include "cli/flags.h"
#include "tests/unit/agent/recordings.h"

namespace podshaper::agent {
namespace {

using nlohmann::json;
namespace fs = std::filesystem;

json readJson(const fs::path& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return json::parse(text.str());
}

json probeJson(const json& recording) {
  auto topo = probeRecording(recording);
  EXPECT_TRUE(topo.ok()) << (topo.ok() ? "" : topo.error().message);
  return topo.ok() ? toJson(*topo) : json();
}

// ---- the machines ----------------------------------------------------------

std::vector<fs::path> recordedMachines() {
  std::vector<fs::path> dirs;
  for (const auto& entry : fs::directory_iterator(PODSHAPER_HARDWARE_DIR)) {
    if (fs::exists(entry.path() / "gpu-recording.json")) dirs.push_back(entry.path());
  }
  std::sort(dirs.begin(), dirs.end());
  return dirs;
}

TEST(RecordedMachines, TodaysCodeReadsTheirAnswersAsTheProbeDidThere) {
  auto machines = recordedMachines();
  ASSERT_GE(machines.size(), 2u) << "docs/hardware/*/gpu-recording.json: scripts/gpu/record.sh on the device machines";
  for (const fs::path& dir : machines) {
    SCOPED_TRACE(dir.filename().string());
    json recording = readJson(dir / "gpu-recording.json");
    json expected = readJson(dir / "probe-recorded.json");  // the probe that ran beside the recording
    json got = probeJson(recording);
    ASSERT_FALSE(expected["gpus"].empty());
    EXPECT_EQ(got["gpus"], expected["gpus"]);
    for (json& pair : expected["pairs"]) pair.erase("bandwidthGBps");
    EXPECT_EQ(got["pairs"], expected["pairs"]);
    EXPECT_EQ(got["host"]["driverVersion"], expected["host"]["driverVersion"]);
    EXPECT_EQ(got["host"]["cudaVersion"], expected["host"]["cudaVersion"]);
  }
}

TEST(RecordedMachines, RecordingWhatARecordingAnswersGivesItBack) {
  for (const fs::path& dir : recordedMachines()) {
    SCOPED_TRACE(dir.filename().string());
    json recording = readJson(dir / "gpu-recording.json");
    auto sources = replayGpus(recording);
    ASSERT_TRUE(sources.ok()) << sources.error().message;
    EXPECT_EQ(recordGpus(*sources), recording);
  }
}

// ---- recordings made here ----------------------------------------------------

constexpr const char* kSwitchBus = "FFFFFFFF:FF:FF.0";

std::string busOf(int i) {
  char bus[32];
  std::snprintf(bus, sizeof bus, "00000000:%02X:00.0", 0x18 + 0x10 * i);
  return bus;
}

// A GPU as record() writes one: `links` NVLinks up, each to `remote` of `remoteType`.
json gpu(int i, int n, int links = 0, std::string remote = kSwitchBus, int remoteType = 2) {
  json g = {{"uuid", "GPU-" + std::to_string(i)},
            {"name", "NVIDIA H100 80GB HBM3"},
            {"pciBusId", busOf(i)},
            {"memoryTotal", 85520809984ULL},
            {"numaNode", i < n / 2 ? 0 : 1},
            {"cpuAffinity", json::array({i < n / 2 ? 0xffffffffULL : 0xffffffff00000000ULL})},
            {"computeIdle", true},
            {"nvlinks", json::array()},
            {"peers", json::array()}};
  for (int link = 0; link < links; ++link) {
    g["nvlinks"].push_back({{"link", link}, {"active", true}, {"remoteType", remoteType}, {"remoteBusId", remote}});
  }
  for (int other = 0; other < n; ++other) {
    if (other == i) continue;
    bool sameSocket = (i < n / 2) == (other < n / 2);
    g["peers"].push_back({{"gpu", other},
                          {"commonAncestor", sameSocket ? 40 : 50},
                          {"p2p", {{"read", 0}, {"write", 0}, {"nvlink", links > 0 ? 0 : 4}, {"atomics", 0}}}});
  }
  return g;
}

json machine(std::vector<json> gpus) {
  json cuda = {{"devices", json::array()}, {"canAccessPeer", json::array()}};
  for (std::size_t i = 0; i < gpus.size(); ++i) {
    std::string bus = gpus[i]["pciBusId"].get<std::string>().substr(4);
    cuda["devices"].push_back({{"busId", bus}});
    json row = json::array();
    for (std::size_t j = 0; j < gpus.size(); ++j) row.push_back(i == j ? json() : json(true));
    cuda["canAccessPeer"].push_back(row);
  }
  return {{"nvml", {{"driverVersion", "570.86.15"}, {"cudaDriverVersion", 12080}, {"deviceCount", gpus.size()},
                    {"gpus", gpus}}},
          {"cuda", cuda},
          {"sysfs", json::object()}};
}

json eightNvSwitchGpus() {
  std::vector<json> gpus;
  for (int i = 0; i < 8; ++i) gpus.push_back(gpu(i, 8, 18));
  return machine(gpus);
}

const json& pairOf(const json& topo, int a, int b) {
  for (const json& pair : topo["pairs"]) {
    if (pair["a"] == a && pair["b"] == b) return pair;
  }
  static const json kNone;
  return kNone;
}

TEST(NvmlBackend, EightGpusOnNvSwitchAreEachJoinedByAllTheirLinks) {
  json topo = probeJson(eightNvSwitchGpus());
  ASSERT_EQ(topo["gpus"].size(), 8u);
  ASSERT_EQ(topo["pairs"].size(), 28u);
  for (const json& pair : topo["pairs"]) {
    EXPECT_EQ(pair["link"], "NV18") << pair.dump();
    EXPECT_EQ(pair["nvlinks"], 18);
    EXPECT_EQ(pair["cudaPeerAccess"], true);
  }
  EXPECT_EQ(pairOf(topo, 0, 1)["pcie"], "NODE");
  EXPECT_EQ(pairOf(topo, 0, 7)["pcie"], "SYS");
  EXPECT_EQ(topo["host"]["driverVersion"], "570.86.15");
  EXPECT_EQ(topo["host"]["cudaVersion"], "12.8");
}

TEST(NvmlBackend, AnOlderDriverWithoutTheRemoteTypeStillKnowsTheSwitchByItsBusId) {
  json recording = eightNvSwitchGpus();
  for (json& g : recording["nvml"]["gpus"]) {
    for (json& link : g["nvlinks"]) {
      link.erase("remoteType");
      link["remoteBusId"] = "ffffffff:ff:ff.0";  // as some drivers spell it
    }
  }
  json topo = probeJson(recording);
  EXPECT_EQ(pairOf(topo, 2, 5)["link"], "NV18");
}

TEST(NvmlBackend, SwitchedGpusWhoseNvlinkCapabilityIsNotOkAreJoinedByPcieOnly) {
  json recording = eightNvSwitchGpus();
  for (json& g : recording["nvml"]["gpus"]) {
    for (json& peer : g["peers"]) peer["p2p"]["nvlink"] = 4;  // NS: a fabric manager that is not running
  }
  json topo = probeJson(recording);
  EXPECT_EQ(pairOf(topo, 0, 1)["nvlinks"], 0);
  EXPECT_EQ(pairOf(topo, 0, 1)["link"], "NODE");
  EXPECT_EQ(pairOf(topo, 3, 4)["link"], "SYS");
}

TEST(NvmlBackend, DirectLinksCountPerPeerAndOthersFallBackToThePciePath) {
  // 0-1 joined by two links, 2-3 by one (the remote bus id in lower case), 0-2 by none.
  json g0 = gpu(0, 4), g1 = gpu(1, 4), g2 = gpu(2, 4), g3 = gpu(3, 4);
  auto link = [](json& g, int n, const std::string& remote) {
    g["nvlinks"].push_back({{"link", n}, {"active", true}, {"remoteType", 0}, {"remoteBusId", remote}});
  };
  link(g0, 0, busOf(1));
  link(g0, 1, busOf(1));
  link(g1, 0, busOf(0));
  link(g1, 1, busOf(0));
  std::string lower = busOf(3);
  for (char& c : lower) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  link(g2, 4, lower);
  link(g3, 4, busOf(2));
  // A link that is down and a link to something that is neither GPU nor switch count for nothing.
  g0["nvlinks"].push_back({{"link", 7}, {"active", false}, {"remoteType", 0}, {"remoteBusId", busOf(2)}});
  g0["nvlinks"].push_back({{"link", 8}, {"active", true}, {"remoteType", 1}, {"remoteBusId", busOf(3)}});
  json topo = probeJson(machine({g0, g1, g2, g3}));
  EXPECT_EQ(pairOf(topo, 0, 1)["link"], "NV2");
  EXPECT_EQ(pairOf(topo, 2, 3)["link"], "NV1");
  EXPECT_EQ(pairOf(topo, 0, 2)["link"], "SYS");
  EXPECT_EQ(pairOf(topo, 0, 2)["nvlinks"], 0);
  EXPECT_EQ(pairOf(topo, 0, 3)["nvlinks"], 0);
}

TEST(NvmlBackend, P2PStatusesInNvidiaSmisWords) {
  json g0 = gpu(0, 2), g1 = gpu(1, 2);
  // read OK, write CNS (chipset), atomics TNS (topology); the other way round is not asked.
  g0["peers"][0]["p2p"] = {{"read", 0}, {"write", 1}, {"nvlink", 4}, {"atomics", 3}};
  json topo = probeJson(machine({g0, g1}));
  EXPECT_EQ(pairOf(topo, 0, 1)["p2p"], json({{"read", "OK"}, {"write", "CNS"}, {"atomics", "TNS"}}));
  g0["peers"][0]["p2p"] = {{"read", 2}, {"write", 5}, {"atomics", 6}};  // GNS, NS (disabled), U; nvlink unasked
  topo = probeJson(machine({g0, g1}));
  EXPECT_EQ(pairOf(topo, 0, 1)["p2p"], json({{"read", "GNS"}, {"write", "NS"}, {"atomics", "U"}}));
  g0["peers"] = json::array();  // NVML gave no answer for the pair
  topo = probeJson(machine({g0, g1}));
  EXPECT_EQ(pairOf(topo, 0, 1)["p2p"], json({{"read", "U"}, {"write", "U"}, {"atomics", "U"}}));
  EXPECT_TRUE(pairOf(topo, 0, 1)["pcie"].is_null());  // no common ancestor said
}

TEST(NvmlBackend, NumaNodeFromNvmlElseSysfsElseTheFirstCpusNode) {
  std::vector<json> gpus;
  for (int i = 0; i < 4; ++i) gpus.push_back(gpu(i, 4));
  gpus[0]["numaNode"] = 1;   // NVML says
  gpus[1].erase("numaNode");  // NVML does not; sysfs does
  gpus[2].erase("numaNode");  // neither; its first CPU (40) is on node 1
  gpus[2]["cpuAffinity"] = json::array({0xff0000000000ULL});
  gpus[3].erase("numaNode");  // nothing says
  gpus[3].erase("cpuAffinity");
  json recording = machine(gpus);
  recording["sysfs"] = {{"bus/pci/devices/0000:28:00.0/numa_node", "1\n"},
                        {"bus/pci/devices/0000:38:00.0/numa_node", "-1\n"},
                        {"devices/system/node/node0/cpulist", "0-31\n"},
                        {"devices/system/node/node1/cpulist", "32-39,40-63\n"}};
  json topo = probeJson(recording);
  EXPECT_EQ(topo["gpus"][0]["numaNode"], 1);
  EXPECT_EQ(topo["gpus"][1]["numaNode"], 1);
  EXPECT_EQ(topo["gpus"][2]["numaNode"], 1);
  EXPECT_EQ(topo["gpus"][2]["cpuAffinity"], "40-47");
  EXPECT_TRUE(topo["gpus"][3]["numaNode"].is_null());
  EXPECT_TRUE(topo["gpus"][3]["cpuAffinity"].is_null() || topo["gpus"][3]["cpuAffinity"] == "");
  EXPECT_EQ(topo["gpus"][1]["cpuAffinity"], "0-31");
}

TEST(NvmlBackend, TheNodesSysfsIsReadUnderTheRootItIsGiven) {
  fs::path root = fs::path(testing::TempDir()) / "sysfs-root";
  fs::create_directories(root / "bus/pci/devices/0000:18:00.0");
  fs::create_directories(root / "devices/system/node/node0");
  std::ofstream(root / "bus/pci/devices/0000:18:00.0/numa_node") << "0\n";
  std::ofstream(root / "devices/system/node/node0/cpulist") << "0-7\n";
  GpuSources node = nodeGpuSources(root.string());
  EXPECT_EQ(node.readSysfs("bus/pci/devices/0000:18:00.0/numa_node"), "0\n");
  EXPECT_EQ(node.readSysfs("devices/system/node/node1/cpulist"), std::nullopt);

  // NVML from a recording that does not say the NUMA node; sysfs from that root.
  json g0 = gpu(0, 1);
  g0.erase("numaNode");
  auto sources = replayGpus(machine({g0}));
  ASSERT_TRUE(sources.ok());
  sources->readSysfs = node.readSysfs;
  auto topo = makeNvmlBackend(std::move(*sources))->probe();
  ASSERT_TRUE(topo.ok());
  EXPECT_EQ(topo->gpus[0].numaNode, 0);
}

TEST(NvmlBackend, NoDriverOrOneThatWillNotStartIsANodeWithoutGpus) {
  for (const char* kind : {"notLoadable", "initFailed"}) {
    json recording = {{"nvml", {{"open", {{"kind", kind}, {"message", "nvmlInit failed: Driver Not Loaded (9)"}}}}}};
    auto topo = probeRecording(recording);
    ASSERT_TRUE(topo.ok()) << kind;
    EXPECT_TRUE(topo->gpus.empty());
    EXPECT_TRUE(topo->pairs.empty());
  }
}

TEST(NvmlBackend, ADriverWithoutTheEntryPointsOrGpusItCannotCountIsAnError) {
  json recording = {
      {"nvml", {{"open", {{"kind", "incomplete"}, {"message", "NVML: a required entry point is missing (driver too old?)"}}}}}};
  auto topo = probeRecording(recording);
  ASSERT_FALSE(topo.ok());
  EXPECT_EQ(topo.error().message, "NVML: a required entry point is missing (driver too old?)");

  recording = {{"nvml", {{"deviceCount", {{"error", "NVML: device count: Unknown Error (999)"}}}}}};
  topo = probeRecording(recording);
  ASSERT_FALSE(topo.ok());
  EXPECT_EQ(topo.error().message, "NVML: device count: Unknown Error (999)");

  json machine2 = machine({gpu(0, 2), gpu(1, 2)});
  machine2["nvml"]["gpus"][1] = {{"error", "NVML: GPU 1: GPU is lost (15)"}};
  topo = probeRecording(machine2);
  ASSERT_FALSE(topo.ok());
  EXPECT_EQ(topo.error().message, "NVML: GPU 1: GPU is lost (15)");
}

TEST(NvmlBackend, CudaPeerAccessIsMatchedByBusIdAndNeedsBothWays) {
  json recording = machine({gpu(0, 3), gpu(1, 3), gpu(2, 3)});
  // CUDA numbers the GPUs the other way round: ordinal 0 is NVML's GPU 2.
  recording["cuda"] = {{"devices", {{{"busId", "0000:38:00.0"}}, {{"busId", "0000:28:00.0"}}, {{"busId", "0000:18:00.0"}}}},
                       {"canAccessPeer", {{nullptr, true, true}, {false, nullptr, true}, {true, true, nullptr}}}};
  json topo = probeJson(recording);
  EXPECT_EQ(pairOf(topo, 0, 1)["cudaPeerAccess"], true);
  EXPECT_EQ(pairOf(topo, 0, 2)["cudaPeerAccess"], true);
  EXPECT_EQ(pairOf(topo, 1, 2)["cudaPeerAccess"], false);  // NVML 2 → 1 (CUDA 0 → 1) yes, 1 → 2 (CUDA 1 → 0) no

  recording["cuda"] = {{"open", {{"message", "libcuda.so.1 not loadable"}}}};
  topo = probeJson(recording);
  EXPECT_FALSE(pairOf(topo, 0, 1).contains("cudaPeerAccess") && !pairOf(topo, 0, 1)["cudaPeerAccess"].is_null());
}

TEST(NvmlBackend, BandwidthIsMeasuredOnlyWhenEveryGpuIsIdle) {
  json recording = machine({gpu(0, 2), gpu(1, 2)});
  auto probe = [](const json& r) {
    auto sources = replayGpus(r);
    EXPECT_TRUE(sources.ok());
    int copies = 0;
    sources->measureBandwidth = [&copies](Topology& topo) -> Result<void> {
      ++copies;
      for (GpuPair& pair : topo.pairs) pair.bandwidthGBps = 390.5;
      return {};
    };
    auto topo = makeNvmlBackend(std::move(*sources), /*measureBandwidth=*/true)->probe();
    EXPECT_TRUE(topo.ok());
    return std::make_pair(copies, topo.ok() ? topo->pairs[0].bandwidthGBps : std::nullopt);
  };
  EXPECT_EQ(probe(recording), std::make_pair(1, std::optional<double>(390.5)));
  recording["nvml"]["gpus"][1]["computeIdle"] = false;  // a training job holds GPU 1
  EXPECT_EQ(probe(recording), std::make_pair(0, std::optional<double>()));
  recording["nvml"]["gpus"][1].erase("computeIdle");  // NVML cannot tell
  EXPECT_EQ(probe(recording), std::make_pair(0, std::optional<double>()));
}

TEST(NvmlBackend, AReplayCopiesNothingOnTheMachineThatReplaysIt) {
  // The recording's bus ids may be this machine's too (cloud VMs share 0000:00:06.0):
  // a replay never measures its own GPUs.
  auto topo = probeRecording(machine({gpu(0, 2), gpu(1, 2)}), /*measureBandwidth=*/true);
  ASSERT_TRUE(topo.ok());
  EXPECT_FALSE(topo->pairs[0].bandwidthGBps.has_value());
}

// ---- what cannot be replayed -------------------------------------------------

TEST(GpuRecording, AMalformedRecordingIsRefusedNamingTheMember) {
  expectEachRefused(machine({gpu(0, 2, 1, busOf(1), 0), gpu(1, 2)}), {
      {[](json& r) { r = json::array(); }, "GPU recording: the recording: expected an object with nvml, cuda and sysfs"},
      {[](json& r) { r["nvml"]["deviceCount"] = 3; }, "GPU recording: nvml.gpus: expected 3 GPUs (deviceCount), not 2"},
      {[](json& r) { r["nvml"]["deviceCount"] = -1; }, "GPU recording: nvml.deviceCount: expected a number of GPUs"},
      {[](json& r) { r["nvml"]["gpus"][1]["peers"][0]["gpu"] = 2; },
       "GPU recording: nvml.gpus[1].peers[0].gpu: expected a GPU index below 2"},
      {[](json& r) { r["nvml"]["gpus"][0]["nvlinks"][0]["link"] = 18; },
       "GPU recording: nvml.gpus[0].nvlinks[0].link: expected a link number below 18"},
      {[](json& r) { r["nvml"]["gpus"][0]["cpuAffinity"] = {-1}; },
       "GPU recording: nvml.gpus[0].cpuAffinity: expected an array of 64-bit words"},
      {[](json& r) { r["nvml"]["gpus"][0]["memoryTotal"] = "80Gi"; },
       "GPU recording: nvml.gpus[0].memoryTotal: expected an integer"},
      {[](json& r) { r["nvml"]["gpus"][0]["nvlinks"][0]["link"] = 4294967296ULL; },  // would wrap to link 0
       "GPU recording: nvml.gpus[0].nvlinks[0].link: expected an integer from 0 to 4294967295"},
      {[](json& r) { r["nvml"]["gpus"][1]["peers"][0]["gpu"] = 4294967297ULL; },  // would wrap to GPU 1
       "GPU recording: nvml.gpus[1].peers[0].gpu: expected an integer from 0 to 4294967295"},
      {[](json& r) { r["nvml"]["gpus"][0]["numaNode"] = 1ULL << 40; },
       "GPU recording: nvml.gpus[0].numaNode: expected an integer from 0 to 4294967295"},
      {[](json& r) { r["nvml"]["cudaDriverVersion"] = -(1LL << 40); },
       "GPU recording: nvml.cudaDriverVersion: expected an integer from -2147483648 to 2147483647"},
      {[](json& r) { r["nvml"]["gpus"][0]["nvlinks"].push_back(r["nvml"]["gpus"][0]["nvlinks"][0]); },
       "GPU recording: nvml.gpus[0].nvlinks[1].link: expected each link once, not link 0 again"},
      {[](json& r) { r["nvml"]["gpus"][0]["peers"][0]["gpu"] = 0; },
       "GPU recording: nvml.gpus[0].peers[0].gpu: expected another GPU than this one (0)"},
      {[](json& r) { r["nvml"]["gpus"][0]["peers"].push_back(r["nvml"]["gpus"][0]["peers"][0]); },
       "GPU recording: nvml.gpus[0].peers[1].gpu: expected each peer once, not GPU 1 again"},
      {[](json& r) { r["nvml"] = {{"open", {{"kind", "gone"}, {"message", "x"}}}}; },
       "GPU recording: nvml.open.kind: expected notLoadable, initFailed or incomplete"},
      {[](json& r) { r["cuda"]["canAccessPeer"][0] = {true}; },
       "GPU recording: cuda.canAccessPeer[0]: expected one answer per device (2)"},
      {[](json& r) { r["sysfs"]["devices/system/node/node0/cpulist"] = 0; },
       "GPU recording: sysfs.devices/system/node/node0/cpulist: expected the file's text"},
  });
}

Result<std::unique_ptr<Backend>> fromArgs(std::vector<std::string> args) {
  std::vector<char*> argv;
  for (std::string& a : args) argv.push_back(a.data());
  auto flags = cli::Flags::parse(static_cast<int>(argv.size()), argv.data(), 0, {"fixture", "p2p-fixture", "recording"});
  if (!flags) return flags.error();
  return backendFromFlags(*flags);
}

TEST(GpuRecording, TheCommandLineNamesWhatItCannotUse) {
  fs::path dir = fs::path(testing::TempDir()) / "recordings";
  fs::create_directories(dir);
  std::ofstream(dir / "not-json.json") << "{\"nvml\": ";
  std::ofstream(dir / "bad.json") << "{\"nvml\": {\"deviceCount\": \"two\"}}";
  std::ofstream(dir / "good.json") << eightNvSwitchGpus().dump();

  auto backend = fromArgs({"--recording", (dir / "not-json.json").string()});
  ASSERT_FALSE(backend.ok());
  EXPECT_EQ(backend.error().message, "--recording: " + (dir / "not-json.json").string() + " is not JSON");
  backend = fromArgs({"--recording", (dir / "bad.json").string()});
  ASSERT_FALSE(backend.ok());
  EXPECT_NE(backend.error().message.find("nvml.deviceCount: expected a number of GPUs"), std::string::npos);
  backend = fromArgs({"--recording", (dir / "missing.json").string()});
  ASSERT_FALSE(backend.ok());
  EXPECT_TRUE(backend.error().message.starts_with("--recording: ")) << backend.error().message;
  backend = fromArgs({"--recording", (dir / "good.json").string(), "--fixture", "x"});
  ASSERT_FALSE(backend.ok());
  EXPECT_EQ(backend.error().message, "--fixture and --recording are two fake backends: give one");

  backend = fromArgs({"--recording", (dir / "good.json").string()});
  ASSERT_TRUE(backend.ok());
  auto topo = (*backend)->probe();
  ASSERT_TRUE(topo.ok());
  EXPECT_EQ(topo->pairs.size(), 28u);
}

}  // namespace
}  // namespace podshaper::agent
