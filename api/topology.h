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

// A GPU's place in a multi-node NVLink fabric (GB200/GB300 NVL72 class), as NVML's GPU fabric
// info says it (docs/agent.md "Multi-node NVLink"). A GPU without one has none.
struct GpuFabric {
  std::string clusterUuid;  // "9277d399-0674-44a9-b64e-d85bb19ce2b0"; all zeros: no multi-node fabric
  uint32_t cliqueId = 0;
  std::string state;   // the GPU's registration with the fabric: NotStarted, InProgress, Completed, Unknown
  std::string status;  // NVML's status of it once completed: Success, or NVML's error ("Timeout", "Error42")
  std::optional<uint32_t> healthMask;  // null: the driver does not tell (it has only NVML's v1 fabric info)
  bool operator==(const GpuFabric&) const = default;
};

// One node's GPU topology: the spec of a GPUTopologyReport (docs/agent.md).
// Field names are the report's JSON names.
struct GpuInfo {
  int index = 0;
  std::string uuid, name, pciBusId;
  std::optional<uint64_t> memoryBytes;
  std::optional<int> numaNode;  // null when unknown
  std::string cpuAffinity;      // "0-47,96-143"
  std::optional<GpuFabric> fabric;  // none on a GPU without a multi-node NVLink fabric
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

// Whether text is a UUID as NVML's fabric cluster UUID is written: 8-4-4-4-12 lower-case hex digits.
bool isUuidText(std::string_view text);

// The inverse of toJson(), for a report's spec as the API server stores it
// (extra fields such as observedAt are ignored). The error names the field:
//   spec.pairs[3].a: expected a GPU index
Result<Topology> topologyFromJson(const nlohmann::json& spec);

// The faults a fabric health mask names, in words ("degraded bandwidth", "route unhealthy"):
// NVML's NVML_GPU_FABRIC_HEALTH_MASK_* fields whose value says the fault is there.
std::vector<std::string> fabricFaults(uint32_t healthMask);

// The node's multi-node NVLink domain: the clique its GPUs' fabric puts them in, as NCCL
// finds it (src/mnnvl.cc) and GFD labels it (nvidia.com/gpu.clique).
struct NvlinkDomain {
  // What keeps the node's GPUs from using it, first found first: some GPUs outside it (in
  // another domain, without fabric info, or with an all-zero cluster UUID), a registration
  // not started or in progress, one completed with an error, a health fault.
  enum class Problem { kNone, kMixed, kNotStarted, kInProgress, kFailed, kUnhealthy };

  // "<clusterUuid>.<cliqueId>", GFD's nvidia.com/gpu.clique value; empty while the GPUs'
  // cluster UUID is all zeros and their registration has not completed or failed
  std::string id;
  int gpus = 0;             // the node's GPUs in it; 0 with no id
  int nodeGpus = 0;         // the node's GPUs
  bool completed = false;   // every GPU's registration completed with success
  std::string state;        // "completed", or the least advanced GPU's: "not started", "in progress", "failed"
  bool healthy = false;     // no GPU's health mask names a fault
  bool healthKnown = false;  // some GPU's driver gave a health mask with a field other than 0 (not supported)
  std::string faults;        // "GPU1: degraded bandwidth; GPU3: route unhealthy"; empty when healthy
  Problem problem = Problem::kNone;
  std::string problemWords;  // empty with kNone: "GPU2 and GPU3 are in NVLink domain ..."

  // "NVLink domain 9277d399-....32766", or "NVLink domain unknown (all-zero cluster UUID)"
  std::string name() const;
  // "NVLink domain 9277d399-....32766: 4 GPUs here, fabric completed, healthy"
  std::string sentence() const;
};

// The domain of the GPUs' fabric, or nothing on a node none of whose GPUs is in one (no fabric
// info, or only all-zero cluster UUIDs registered with success: NVSwitch boards without
// multi-node NVLink). GPUs registering or failed with all-zero UUIDs give a domain without
// id and that problem. Where GPUs disagree, the domain of the most of them (the first GPU's
// on a tie) and the problem.
std::optional<NvlinkDomain> nvlinkDomainOf(const Topology& topology);

}  // namespace podshaper

namespace podshaper {

// The matrix as `nvidia-smi topo -m` prints it, the P2P read matrix as
// `nvidia-smi topo -p2p r` does, and a one-line verdict for NCCL.
std::string renderTopologyTable(const Topology& topology);

}  // namespace podshaper
