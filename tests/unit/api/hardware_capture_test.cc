// The agent's real probe against nvidia-smi on the same host, for every capture under
// docs/hardware/ (scripts/gpu/capture.sh on the device machines): every pair's link,
// NVLink count and P2P read/write/atomics, and every GPU's CPU and NUMA affinity, must be
// what nvidia-smi printed. A capture added there is checked without touching this file.
#include "api/topology.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <sstream>

namespace podshaper {
namespace {

namespace fs = std::filesystem;

std::string slurp(const fs::path& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

std::vector<fs::path> captures() {
  std::vector<fs::path> dirs;
  for (const auto& entry : fs::directory_iterator(PODSHAPER_HARDWARE_DIR))
    if (fs::exists(entry.path() / "probe.json") && fs::exists(entry.path() / "nvidia-smi-topo-m.txt"))
      dirs.push_back(entry.path());
  std::sort(dirs.begin(), dirs.end());
  return dirs;
}

// nvidia-smi's view: topo -m, with one -p2p matrix (r, w or a) behind it.
Topology nvidiaSmi(const fs::path& dir, char p2pMode) {
  auto text = slurp(dir / "nvidia-smi-topo-m.txt");
  auto p2p = dir / (std::string("nvidia-smi-topo-p2p-") + p2pMode + ".txt");
  if (fs::exists(p2p)) text += slurp(p2p);
  auto topo = parseNvidiaSmiTopology(text);
  EXPECT_TRUE(topo.ok()) << dir << ": " << topo.error().message;
  return topo.ok() ? *topo : Topology{};
}

TEST(HardwareCapture, EveryHostIsChecked) {
  auto dirs = captures();
  std::vector<std::string> names;
  for (const auto& d : dirs) names.push_back(d.filename().string());
  // The hosts the agent has been run on; a missing one means a capture was lost.
  for (const char* host : {"h100-x1", "h200-x2", "h200-x4"})
    EXPECT_NE(std::find(names.begin(), names.end(), host), names.end()) << host;
}

TEST(HardwareCapture, AgentProbeEqualsNvidiaSmi) {
  for (const auto& dir : captures()) {
    SCOPED_TRACE(dir.filename().string());
    auto agent = topologyFromJson(nlohmann::json::parse(slurp(dir / "probe.json")));
    ASSERT_TRUE(agent.ok()) << agent.error().message;
    auto smi = nvidiaSmi(dir, 'r');
    ASSERT_EQ(agent->gpus.size(), smi.gpus.size());
    ASSERT_EQ(agent->pairs.size(), smi.gpus.size() * (smi.gpus.size() - 1) / 2);
    ASSERT_EQ(agent->pairs.size(), smi.pairs.size());
    for (std::size_t i = 0; i < smi.gpus.size(); ++i) {
      EXPECT_EQ(agent->gpus[i].index, smi.gpus[i].index);
      EXPECT_EQ(agent->gpus[i].cpuAffinity, smi.gpus[i].cpuAffinity) << "GPU" << i;
      // The first 2×H200 capture predates the agent's NUMA fallback and says null.
      if (agent->gpus[i].numaNode) {
        EXPECT_EQ(agent->gpus[i].numaNode, smi.gpus[i].numaNode) << "GPU" << i;
      }
    }
    auto write = nvidiaSmi(dir, 'w'), atomics = nvidiaSmi(dir, 'a');
    bool haveWrite = fs::exists(dir / "nvidia-smi-topo-p2p-w.txt");
    bool haveAtomics = fs::exists(dir / "nvidia-smi-topo-p2p-a.txt");
    for (std::size_t k = 0; k < smi.pairs.size(); ++k) {
      const auto& a = agent->pairs[k];
      const auto& s = smi.pairs[k];
      SCOPED_TRACE("GPU" + std::to_string(s.a) + "-GPU" + std::to_string(s.b));
      ASSERT_EQ(a.a, s.a);
      ASSERT_EQ(a.b, s.b);
      EXPECT_EQ(a.link, s.link);
      EXPECT_EQ(a.nvlinks, s.nvlinks);
      EXPECT_EQ(a.p2p.read, s.p2p.read);
      if (haveWrite) {
        EXPECT_EQ(a.p2p.write, write.pairs[k].p2p.read);
      }
      if (haveAtomics) {
        EXPECT_EQ(a.p2p.atomics, atomics.pairs[k].p2p.read);
      }
      // CUDA agrees with NVML wherever NVML says reads work.
      if (a.p2p.read == "OK") {
        EXPECT_EQ(a.cudaPeerAccess, std::optional<bool>(true));
      }
    }
  }
}

// The measured bandwidth of every pair is within 5% of torch's copy of the same size on
// the same host (torch-copy.txt, scripts/gpu/torch_copy.py), where both were measured.
TEST(HardwareCapture, BandwidthWithinFivePercentOfTorch) {
  int checked = 0;
  for (const auto& dir : captures()) {
    if (!fs::exists(dir / "probe-bandwidth.json") || !fs::exists(dir / "torch-copy.txt")) continue;
    SCOPED_TRACE(dir.filename().string());
    auto agent = topologyFromJson(nlohmann::json::parse(slurp(dir / "probe-bandwidth.json")));
    ASSERT_TRUE(agent.ok()) << agent.error().message;
    std::istringstream torch(slurp(dir / "torch-copy.txt"));
    std::string line;
    std::vector<double> directions;  // "torch copy GPU0->1: 386.6 GB/s", both ways in turn
    while (std::getline(torch, line))
      if (line.rfind("torch copy GPU", 0) == 0) directions.push_back(std::stod(line.substr(line.find(": ") + 2)));
    ASSERT_EQ(directions.size(), 2 * agent->pairs.size());
    for (std::size_t k = 0; k < agent->pairs.size(); ++k) {
      ASSERT_TRUE(agent->pairs[k].bandwidthGBps) << "pair " << k;
      double torchOneWay = (directions[2 * k] + directions[2 * k + 1]) / 2;
      EXPECT_NEAR(*agent->pairs[k].bandwidthGBps / torchOneWay, 1.0, 0.05) << "pair " << k;
      ++checked;
    }
  }
  EXPECT_GE(checked, 7);  // 1 pair on the 2×H200 host, 6 on the 4×H200 host
}

}  // namespace
}  // namespace podshaper
