#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "api/memlock.h"
#include "base/result.h"

namespace podshaper {

// One node's GPU topology: the spec of a GPUTopologyReport (docs/agent.md).
// Field names are the report's JSON names.
struct GpuInfo {
  int index = 0;
  std::string uuid, name, pciBusId;
  std::optional<uint64_t> memoryBytes;
  std::optional<int> numaNode;  // null when unknown
  std::string cpuAffinity;      // "0-47,96-143"
};

// nvidia-smi's P2P words: OK, NS, CNS, GNS, TNS, U.
struct P2PStatus {
  std::string read = "U", write = "U", atomics = "U";
};

struct GpuPair {
  int a = 0, b = 0;  // a < b
  std::string link;  // what `nvidia-smi topo -m` prints: NV<n>, PIX, PXB, PHB, NODE, SYS
  int nvlinks = 0;
  std::string pcie;  // the PCIe path class even under NVLink; empty when unknown
  P2PStatus p2p;
  std::optional<bool> cudaPeerAccess;
  std::optional<double> bandwidthGBps;
};

// What the agent's memlock-probe container found: the runtime was asked to start
// it with RLIMIT_MEMLOCK `requested` (the NRI annotation shaped pods carry), and
// either did (granted; memlockBytes is what it got) or could not (not granted,
// with the runtime's words), in which case shaped pods would not start either.
struct MemlockProbe {
  MemlockLimit requested;
  bool granted = true;
  std::string message;  // the runtime's, when not granted
  bool operator==(const MemlockProbe&) const = default;
};

struct HostInfo {
  std::optional<uint64_t> memoryBytes;
  std::optional<uint64_t> memlockBytes;  // null: unlimited
  std::optional<MemlockProbe> memlockProbe;  // unset: no probe (or none heard from yet)
  bool nvidiaFs = false, nvidiaPeermem = false;
  std::string driverVersion, cudaVersion;
};

struct Topology {
  std::vector<GpuInfo> gpus;
  std::vector<GpuPair> pairs;
  HostInfo host;
};

// The raw output of `nvidia-smi topo -m`, optionally followed by `nvidia-smi topo -p2p r`,
// as nvidia-smi prints it (tabs, ANSI escapes, legends, NIC columns). The agent's fake
// backend reads these captures.
Result<Topology> parseNvidiaSmiTopology(std::string_view text);

// The shape of each matrix in an nvidia-smi output, to tell a `topo -m` output
// from a `topo -p2p r` one and to compare their sizes before parsing them
// together (the parser reads only the pairs the topo -m matrix names).
struct NvidiaSmiMatrixShape {
  int gpuColumns = 0;
  int gpuRows = 0;
  bool cpuColumn = false;  // `topo -m` has CPU Affinity columns; `-p2p r` has none
};
std::vector<NvidiaSmiMatrixShape> nvidiaSmiMatrixShapes(std::string_view text);

nlohmann::json toJson(const Topology& topology);

// The inverse of toJson(), for a report's spec as the API server stores it
// (extra fields such as observedAt are ignored). The error names the field:
//   spec.pairs[3].a: expected a GPU index
Result<Topology> topologyFromJson(const nlohmann::json& spec);

}  // namespace podshaper

namespace podshaper {

// The matrix as `nvidia-smi topo -m` prints it, the P2P read matrix as
// `nvidia-smi topo -p2p r` does, and a one-line verdict for NCCL.
std::string renderTopologyTable(const Topology& topology);

}  // namespace podshaper
