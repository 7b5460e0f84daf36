// The real backend: what NVML's and CUDA's answers (agent/gpu_driver.h) say about
// the node's GPUs, their pairs, links and P2P status, in the topology model.

#include <algorithm>
#include <cctype>
#include <map>
#include <memory>
#include <sstream>
#include <string>

#include "agent/backend.h"
#include "agent/gpu_driver.h"
#include "agent/gpu_recording.h"
#include "agent/host.h"
#include "cli/logging.h"

namespace podshaper::agent {
namespace {
const cli::Logger& kLog = cli::logger("probe");

// nvidia-smi's words for NVML's P2P status.
std::string p2pWord(int status) {
  switch (status) {
    case 0: return "OK";
    case 1: return "CNS";
    case 2: return "GNS";
    case 3: return "TNS";
    case 4: case 5: return "NS";
    default: return "U";
  }
}

std::string pcieWord(int level) {
  switch (level) {
    case NVML_TOPOLOGY_INTERNAL:
    case NVML_TOPOLOGY_SINGLE: return "PIX";
    case NVML_TOPOLOGY_MULTIPLE: return "PXB";
    case NVML_TOPOLOGY_HOSTBRIDGE: return "PHB";
    case NVML_TOPOLOGY_NODE: return "NODE";
    case NVML_TOPOLOGY_SYSTEM: return "SYS";
    default: return "";
  }
}

std::string lower(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

// "00000000:18:00.0" → "0000:18:00.0" as sysfs names PCI devices.
std::string sysfsBusId(const std::string& nvmlBusId) {
  std::string id = lower(nvmlBusId);
  auto colon = id.find(':');
  if (colon != std::string::npos && colon > 4) id = id.substr(colon - 4);
  return id;
}

std::optional<int> sysfsNumaNode(const GpuSources& sources, const std::string& busId) {
  auto text = sources.readSysfs(sysfsNumaNodePath(busId));
  if (!text) return std::nullopt;
  std::istringstream in(*text);
  int node = -1;
  if (!(in >> node) || node < 0) return std::nullopt;
  return node;
}

// Whether a sysfs cpulist ("0-23,48-71") holds the CPU.
bool cpuListHolds(const std::string& list, int cpu) {
  std::size_t pos = 0;
  while (pos < list.size()) {
    std::size_t comma = list.find(',', pos);
    std::string range = list.substr(pos, comma == std::string::npos ? std::string::npos : comma - pos);
    std::size_t dash = range.find('-');
    try {
      int lo = std::stoi(range.substr(0, dash));
      int hi = dash == std::string::npos ? lo : std::stoi(range.substr(dash + 1));
      if (cpu >= lo && cpu <= hi) return true;
    } catch (const std::exception&) {
      return false;
    }
    if (comma == std::string::npos) break;
    pos = comma + 1;
  }
  return false;
}

// The NUMA node holding the first CPU of the GPU's affinity, as nvidia-smi's
// "NUMA Affinity" column shows it, when neither NVML nor sysfs says.
std::optional<int> numaFromCpus(const GpuSources& sources, const std::vector<unsigned long>& mask) {
  const std::size_t bitsPer = sizeof(unsigned long) * 8;
  int first = -1;
  for (std::size_t cpu = 0; cpu < mask.size() * bitsPer && first < 0; ++cpu) {
    if ((mask[cpu / bitsPer] >> (cpu % bitsPer)) & 1UL) first = static_cast<int>(cpu);
  }
  if (first < 0) return std::nullopt;
  for (int node = 0; node < kMaxNumaNodes; ++node) {
    auto list = sources.readSysfs(sysfsCpuListPath(node));
    if (!list) break;
    if (cpuListHolds(list->substr(0, list->find('\n')), first)) return node;
  }
  return std::nullopt;
}

std::string cpuList(const std::vector<unsigned long>& mask) {
  std::string out;
  int start = -1;
  const int bits = static_cast<int>(mask.size() * sizeof(unsigned long) * 8);
  auto isSet = [&](int cpu) { return (mask[cpu / (sizeof(unsigned long) * 8)] >> (cpu % (sizeof(unsigned long) * 8))) & 1UL; };
  for (int cpu = 0; cpu <= bits; ++cpu) {
    bool set = cpu < bits && isSet(cpu);
    if (set && start < 0) start = cpu;
    if (!set && start >= 0) {
      out += (out.empty() ? "" : ",") + std::to_string(start) + (cpu - 1 > start ? "-" + std::to_string(cpu - 1) : "");
      start = -1;
    }
  }
  return out;
}

// NVML's nvmlReturn_t in a word, for a fabric registration's status: the errors a
// registration may end in by name, others by number.
std::string nvmlStatusWord(nvmlReturn_t status) {
  switch (status) {
    case 0: return "Success";
    case 3: return "NotSupported";
    case 10: return "Timeout";
    case 15: return "GpuIsLost";
    case 17: return "OperatingSystem";
    case 20: return "Memory";
    case 23: return "InsufficientResources";
    case 27: return "NotReady";
    case 29: return "InvalidState";
    case 999: return "Unknown";
    default: return "Error" + std::to_string(status);
  }
}

std::string fabricStateWord(unsigned char state) {
  switch (state) {
    case NVML_GPU_FABRIC_STATE_NOT_STARTED: return "NotStarted";
    case NVML_GPU_FABRIC_STATE_IN_PROGRESS: return "InProgress";
    case NVML_GPU_FABRIC_STATE_COMPLETED: return "Completed";
    default: return "Unknown";
  }
}

// A GPU's fabric, when NVML tells of one: a GPU without (a host without NVSwitch trays, a
// 1×H200 VM, an older driver) answers NOT_SUPPORTED, or state NOT_SUPPORTED.
std::optional<GpuFabric> readFabric(const Nvml& nvml, nvmlDevice_t device) {
  auto info = nvml.gpuFabricInfo(device);
  if (!info || info->state == NVML_GPU_FABRIC_STATE_NOT_SUPPORTED) return std::nullopt;
  GpuFabric fabric;
  fabric.clusterUuid = uuidText(info->clusterUuid);
  fabric.cliqueId = info->cliqueId;
  fabric.state = fabricStateWord(info->state);
  fabric.status = nvmlStatusWord(info->status);
  fabric.healthMask = info->healthMask;
  return fabric;
}

// What NVML says of one GPU: its identity, memory, NUMA node and CPUs.
GpuInfo readGpu(const Nvml& nvml, const GpuSources& sources, nvmlDevice_t device, unsigned index) {
  GpuInfo gpu;
  gpu.index = static_cast<int>(index);
  gpu.uuid = nvml.uuid(device).value_or("");
  gpu.name = nvml.name(device).value_or("");
  gpu.pciBusId = nvml.pciBusId(device).value_or("");
  gpu.memoryBytes = nvml.memoryTotal(device);
  if (auto numa = nvml.numaNode(device)) gpu.numaNode = static_cast<int>(*numa);
  else gpu.numaNode = sysfsNumaNode(sources, gpu.pciBusId);  // NVML says not supported on many hosts
  if (auto mask = nvml.cpuAffinity(device, kAffinityWords)) {
    gpu.cpuAffinity = cpuList(*mask);
    if (!gpu.numaNode) gpu.numaNode = numaFromCpus(sources, *mask);
  }
  gpu.fabric = readFabric(nvml, device);
  return gpu;
}

// One GPU's NVLinks that are up.
struct NvLinks {
  int active = 0;
  bool switched = false;              // some lead to an NVSwitch
  std::map<std::string, int> direct;  // links straight to another GPU, by its lower-case bus id
};

NvLinks readNvLinks(const Nvml& nvml, nvmlDevice_t device) {
  NvLinks links;
  for (unsigned link = 0; link < NVML_NVLINK_MAX_LINKS; ++link) {
    if (!nvml.nvLinkActive(device, link)) continue;
    ++links.active;
    auto type = nvml.nvLinkRemoteType(device, link);
    auto remote = nvml.nvLinkRemoteBusId(device, link);
    // Through NVSwitch the remote is the switch, whose bus id reads FFFFFFFF:FF:FF.0.
    if (type == NVML_NVLINK_DEVICE_TYPE_SWITCH || (remote && lower(*remote).starts_with("ffffffff:ff:ff"))) {
      links.switched = true;
      continue;
    }
    if (remote && (!type || *type == NVML_NVLINK_DEVICE_TYPE_GPU)) ++links.direct[lower(*remote)];
  }
  return links;
}

// A GPU as probe keeps it beside its GpuInfo, for the pairs.
struct ProbedGpu {
  nvmlDevice_t handle;
  NvLinks links;
};

// Every GPU NVML counts, in its order, into `gpus`.
Result<std::vector<ProbedGpu>> readGpus(const Nvml& nvml, const GpuSources& sources, std::vector<GpuInfo>& gpus) {
  auto count = nvml.deviceCount();
  if (!count) return count.error();
  std::vector<ProbedGpu> devices;
  for (unsigned i = 0; i < *count; ++i) {
    auto handle = nvml.deviceByIndex(i);
    if (!handle) return handle.error();
    gpus.push_back(readGpu(nvml, sources, *handle, i));
    devices.push_back({*handle, readNvLinks(nvml, *handle)});
  }
  return devices;
}

void readVersions(const Nvml& nvml, HostInfo& host) {
  if (auto driver = nvml.driverVersion()) host.driverVersion = *driver;
  if (auto cuda = nvml.cudaDriverVersion()) {
    host.cudaVersion = std::to_string(*cuda / 1000) + "." + std::to_string(*cuda % 1000 / 10);
  }
}

// How many NVLinks join GPUs a and b. Direct links name the peer's bus id; through NVSwitch every remote is the
// switch, and NVML's NVLINK P2P capability tells whether the pair is joined.
int nvlinksBetween(const Nvml& nvml, const ProbedGpu& a, const ProbedGpu& b, const std::string& bBusId) {
  auto direct = a.links.direct.find(lower(bBusId));
  if (direct != a.links.direct.end()) return direct->second;
  if (a.links.switched && b.links.switched &&
      nvml.p2pStatus(a.handle, b.handle, NVML_P2P_CAPS_INDEX_NVLINK) == NVML_P2P_STATUS_OK) {
    return std::min(a.links.active, b.links.active);
  }
  return 0;
}

GpuPair readPair(const Nvml& nvml, const std::vector<ProbedGpu>& devices, const std::vector<GpuInfo>& gpus,
                 unsigned a, unsigned b) {
  GpuPair pair;
  pair.a = static_cast<int>(a);
  pair.b = static_cast<int>(b);
  if (auto level = nvml.commonAncestor(devices[a].handle, devices[b].handle)) pair.pcie = pcieWord(*level);
  auto p2p = [&](int caps) { return p2pWord(nvml.p2pStatus(devices[a].handle, devices[b].handle, caps)); };
  pair.p2p.read = p2p(NVML_P2P_CAPS_INDEX_READ);
  pair.p2p.write = p2p(NVML_P2P_CAPS_INDEX_WRITE);
  pair.p2p.atomics = p2p(NVML_P2P_CAPS_INDEX_ATOMICS);
  pair.nvlinks = nvlinksBetween(nvml, devices[a], devices[b], gpus[b].pciBusId);
  pair.link = pair.nvlinks > 0 ? "NV" + std::to_string(pair.nvlinks) : pair.pcie;
  return pair;
}

using PeerAccess = std::map<std::pair<std::string, std::string>, bool>;

// cuDeviceCanAccessPeer both ways, keyed by NVML bus ids (CUDA may order GPUs
// differently). Empty when libcuda is not there.
PeerAccess cudaPeerAccess(const GpuSources& sources, const std::vector<GpuInfo>& gpus) {
  PeerAccess out;
  auto opened = sources.openCuda();
  if (!opened) {
    kLog.warn("{}: cudaPeerAccess left unknown", opened.error().message);
    return out;
  }
  const Cuda& cuda = **opened;
  std::vector<Cuda::Device> dev;
  for (int i = 0; i < cuda.deviceCount(); ++i) {
    auto device = cuda.device(i);
    if (!device) return out;
    dev.push_back(std::move(*device));
  }
  const int n = static_cast<int>(dev.size());
  auto same = [](const std::string& nvmlId, const std::string& cudaId) {
    return sysfsBusId(nvmlId) == sysfsBusId(cudaId);
  };
  for (const auto& a : gpus) {
    for (const auto& b : gpus) {
      int ia = -1, ib = -1;
      for (int i = 0; i < n; ++i) {
        if (same(a.pciBusId, dev[i].busId)) ia = i;
        if (same(b.pciBusId, dev[i].busId)) ib = i;
      }
      if (ia < 0 || ib < 0 || ia == ib) continue;
      auto ab = cuda.canAccessPeer(dev[ia].handle, dev[ib].handle);
      auto ba = ab ? cuda.canAccessPeer(dev[ib].handle, dev[ia].handle) : std::nullopt;
      if (ab && ba) out[{a.pciBusId, b.pciBusId}] = *ab && *ba;
    }
  }
  return out;
}

std::vector<GpuPair> readPairs(const Nvml& nvml, const std::vector<ProbedGpu>& devices,
                               const std::vector<GpuInfo>& gpus, const PeerAccess& peers) {
  std::vector<GpuPair> pairs;
  for (unsigned a = 0; a < devices.size(); ++a) {
    for (unsigned b = a + 1; b < devices.size(); ++b) {
      GpuPair pair = readPair(nvml, devices, gpus, a, b);
      auto ab = peers.find({gpus[a].pciBusId, gpus[b].pciBusId});
      if (ab != peers.end()) pair.cudaPeerAccess = ab->second;
      pairs.push_back(std::move(pair));
    }
  }
  return pairs;
}

// Copies would slow a running job and be slowed by it: measure idle GPUs only.
void measureIfIdle(const Nvml& nvml, const GpuSources& sources, const std::vector<ProbedGpu>& devices,
                   Topology& topo) {
  bool busy = false;
  for (const ProbedGpu& device : devices) {
    if (!nvml.computeIdle(device.handle)) busy = true;
  }
  if (busy) {
    kLog.warn("bandwidth not measured: a compute process is running on a GPU (or NVML cannot tell)");
  } else if (auto measured = sources.measureBandwidth(topo); !measured) {
    kLog.warn("{}", measured.error().message);
  }
}

class NvmlBackend : public Backend {
 public:
  NvmlBackend(GpuSources sources, bool measureBandwidth)
      : sources_(std::move(sources)), measureBandwidth_(measureBandwidth) {}

  Result<Topology> probe() override {
    Topology topo;
    topo.host = readHost();
    auto opened = sources_.openNvml();
    if (!opened) {
      // No driver, or one that will not start, is a node without GPUs, not an error.
      const NvmlOpenError& error = opened.error();
      if (error.kind == NvmlOpenError::Kind::kIncomplete) return makeError(error.message);
      if (error.kind == NvmlOpenError::Kind::kNotLoadable) {
        kLog.warn("{}: no NVIDIA driver here, reporting no GPUs", error.message);
      } else {
        kLog.warn("{}; reporting no GPUs", error.message);
      }
      return topo;
    }
    const Nvml& nvml = **opened;
    readVersions(nvml, topo.host);
    auto devices = readGpus(nvml, sources_, topo.gpus);
    if (!devices) return devices.error();
    auto peers = cudaPeerAccess(sources_, topo.gpus);
    topo.pairs = readPairs(nvml, *devices, topo.gpus, peers);
    if (measureBandwidth_ && !topo.pairs.empty()) measureIfIdle(nvml, sources_, *devices, topo);
    return topo;
  }

 private:
  GpuSources sources_;
  bool measureBandwidth_;
};

}  // namespace

std::string sysfsNumaNodePath(const std::string& nvmlBusId) {
  return "bus/pci/devices/" + sysfsBusId(nvmlBusId) + "/numa_node";
}

std::string uuidText(const std::array<unsigned char, 16>& bytes) {
  static constexpr char kHex[] = "0123456789abcdef";
  std::string out;
  for (std::size_t i = 0; i < bytes.size(); ++i) {
    if (i == 4 || i == 6 || i == 8 || i == 10) out += '-';
    out += kHex[bytes[i] >> 4];
    out += kHex[bytes[i] & 0xF];
  }
  return out;
}

std::optional<std::array<unsigned char, 16>> uuidBytes(const std::string& text) {
  if (!isUuidText(text)) return std::nullopt;
  std::array<unsigned char, 16> bytes{};
  std::size_t at = 0;
  auto digit = [](char c) { return c <= '9' ? c - '0' : c - 'a' + 10; };
  for (std::size_t i = 0; i < text.size(); i += 2) {
    if (text[i] == '-') ++i;
    bytes[at++] = static_cast<unsigned char>(digit(text[i]) << 4 | digit(text[i + 1]));
  }
  return bytes;
}

std::string sysfsCpuListPath(int numaNode) { return "devices/system/node/node" + std::to_string(numaNode) + "/cpulist"; }

std::unique_ptr<Backend> makeNvmlBackend(GpuSources sources, bool measureBandwidth) {
  return std::make_unique<NvmlBackend>(std::move(sources), measureBandwidth);
}

Result<std::unique_ptr<Backend>> backendFromFlags(const cli::Flags& flags, bool measureBandwidth) {
  if (flags.has("p2p-fixture") && !flags.has("fixture")) {
    return makeError("--p2p-fixture needs --fixture (the nvidia-smi topo -m output it goes with)");
  }
  if (flags.has("fixture") && flags.has("recording")) {
    return makeError("--fixture and --recording are two fake backends: give one");
  }
  if (flags.has("fixture")) return makeFixtureBackend(*flags.get("fixture"), flags.get("p2p-fixture", ""));
  if (auto path = flags.get("recording")) {
    auto text = cli::readFile(*path);
    if (!text) return makeError("--recording: " + text.error().message);
    auto json = nlohmann::json::parse(*text, nullptr, false);
    if (json.is_discarded()) return makeError("--recording: " + *path + " is not JSON");
    auto sources = replayGpus(json);
    if (!sources) return makeError("--recording: " + *path + ": " + sources.error().message);
    return makeNvmlBackend(std::move(*sources), measureBandwidth);
  }
  return makeNvmlBackend(nodeGpuSources(), measureBandwidth);
}

}  // namespace podshaper::agent
