// The real backend: NVML and the CUDA driver API through dlopen, so the agent
// builds without a CUDA toolkit and runs on nodes without one. The few entry
// points and enums used are declared here, as NVML's and CUDA's headers do.
#include <dlfcn.h>
#include <spdlog/spdlog.h>

#include <array>
#include <cctype>
#include <fstream>
#include <map>
#include <memory>
#include <string>

#include "agent/backend.h"
#include "agent/bandwidth.h"
#include "agent/host.h"

namespace podshaper::agent {
namespace {

using nvmlReturn_t = int;
using nvmlDevice_t = struct nvmlDevice_st*;
constexpr nvmlReturn_t NVML_SUCCESS = 0;
constexpr unsigned NVML_NVLINK_MAX_LINKS = 18;

struct nvmlPciInfo_t {
  char busIdLegacy[16];
  unsigned int domain, bus, device, pciDeviceId, pciSubSystemId;
  char busId[32];
};
struct nvmlMemory_t {
  unsigned long long total, free, used;
};
// nvmlGpuTopologyLevel_t
constexpr int NVML_TOPOLOGY_INTERNAL = 0, NVML_TOPOLOGY_SINGLE = 10, NVML_TOPOLOGY_MULTIPLE = 20,
              NVML_TOPOLOGY_HOSTBRIDGE = 30, NVML_TOPOLOGY_NODE = 40, NVML_TOPOLOGY_SYSTEM = 50;
// nvmlGpuP2PCapsIndex_t and nvmlGpuP2PStatus_t
constexpr int NVML_P2P_CAPS_INDEX_READ = 0, NVML_P2P_CAPS_INDEX_WRITE = 1, NVML_P2P_CAPS_INDEX_NVLINK = 2,
              NVML_P2P_CAPS_INDEX_ATOMICS = 3;
// nvmlIntNvLinkDeviceType_t
constexpr int NVML_NVLINK_DEVICE_TYPE_GPU = 0, NVML_NVLINK_DEVICE_TYPE_SWITCH = 2;

struct DlClose {
  void operator()(void* h) const { if (h) dlclose(h); }
};
using Library = std::unique_ptr<void, DlClose>;

template <class F>
F symbol(void* lib, const char* name) {
  return reinterpret_cast<F>(dlsym(lib, name));
}

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

std::optional<int> sysfsNumaNode(const std::string& busId) {
  std::ifstream in("/sys/bus/pci/devices/" + sysfsBusId(busId) + "/numa_node");
  int node = -1;
  if (!(in >> node) || node < 0) return std::nullopt;
  return node;
}

// The NUMA node holding the first CPU of the GPU's affinity, as nvidia-smi's
// "NUMA Affinity" column shows it, when neither NVML nor sysfs says.
std::optional<int> numaFromCpus(const std::vector<unsigned long>& mask) {
  const std::size_t bitsPer = sizeof(unsigned long) * 8;
  int first = -1;
  for (std::size_t cpu = 0; cpu < mask.size() * bitsPer && first < 0; ++cpu) {
    if ((mask[cpu / bitsPer] >> (cpu % bitsPer)) & 1UL) first = static_cast<int>(cpu);
  }
  if (first < 0) return std::nullopt;
  for (int node = 0; node < 1024; ++node) {
    std::ifstream in("/sys/devices/system/node/node" + std::to_string(node) + "/cpulist");
    if (!in) break;
    std::string list;
    std::getline(in, list);
    std::size_t pos = 0;
    while (pos < list.size()) {
      std::size_t comma = list.find(',', pos);
      std::string range = list.substr(pos, comma == std::string::npos ? std::string::npos : comma - pos);
      std::size_t dash = range.find('-');
      try {
        int lo = std::stoi(range.substr(0, dash));
        int hi = dash == std::string::npos ? lo : std::stoi(range.substr(dash + 1));
        if (first >= lo && first <= hi) return node;
      } catch (const std::exception&) {
        break;
      }
      if (comma == std::string::npos) break;
      pos = comma + 1;
    }
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

class NvmlBackend : public Backend {
 public:
  explicit NvmlBackend(bool measureBandwidth) : measureBandwidth_(measureBandwidth) {}

  Result<Topology> probe() override {
    Topology topo;
    topo.host = readHost();
    Library nvml(dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL));
    if (!nvml) {
      spdlog::warn("agent: libnvidia-ml.so.1 not loadable ({}): no NVIDIA driver here, reporting no GPUs", dlerror());
      return topo;
    }
    auto init = symbol<nvmlReturn_t (*)()>(nvml.get(), "nvmlInit_v2");
    auto shutdown = symbol<nvmlReturn_t (*)()>(nvml.get(), "nvmlShutdown");
    auto errorString = symbol<const char* (*)(nvmlReturn_t)>(nvml.get(), "nvmlErrorString");
    if (!init || !shutdown) return makeError("NVML: nvmlInit_v2/nvmlShutdown missing from libnvidia-ml.so.1");
    auto why = [&](nvmlReturn_t r) { return std::string(errorString ? errorString(r) : "error") + " (" + std::to_string(r) + ")"; };
    if (nvmlReturn_t r = init(); r != NVML_SUCCESS) {
      spdlog::warn("agent: nvmlInit failed: {}; reporting no GPUs", why(r));
      return topo;
    }
    struct Shutdown {
      nvmlReturn_t (*fn)();
      ~Shutdown() { fn(); }
    } guard{shutdown};

    auto getCount = symbol<nvmlReturn_t (*)(unsigned*)>(nvml.get(), "nvmlDeviceGetCount_v2");
    auto getHandle = symbol<nvmlReturn_t (*)(unsigned, nvmlDevice_t*)>(nvml.get(), "nvmlDeviceGetHandleByIndex_v2");
    auto getUuid = symbol<nvmlReturn_t (*)(nvmlDevice_t, char*, unsigned)>(nvml.get(), "nvmlDeviceGetUUID");
    auto getName = symbol<nvmlReturn_t (*)(nvmlDevice_t, char*, unsigned)>(nvml.get(), "nvmlDeviceGetName");
    auto getPci = symbol<nvmlReturn_t (*)(nvmlDevice_t, nvmlPciInfo_t*)>(nvml.get(), "nvmlDeviceGetPciInfo_v3");
    auto getMemory = symbol<nvmlReturn_t (*)(nvmlDevice_t, nvmlMemory_t*)>(nvml.get(), "nvmlDeviceGetMemoryInfo");
    auto getNuma = symbol<nvmlReturn_t (*)(nvmlDevice_t, unsigned*)>(nvml.get(), "nvmlDeviceGetNumaNodeId");
    auto getAffinity = symbol<nvmlReturn_t (*)(nvmlDevice_t, unsigned, unsigned long*)>(nvml.get(), "nvmlDeviceGetCpuAffinity");
    auto getAncestor = symbol<nvmlReturn_t (*)(nvmlDevice_t, nvmlDevice_t, int*)>(nvml.get(), "nvmlDeviceGetTopologyCommonAncestor");
    auto getP2P = symbol<nvmlReturn_t (*)(nvmlDevice_t, nvmlDevice_t, int, int*)>(nvml.get(), "nvmlDeviceGetP2PStatus");
    auto linkState = symbol<nvmlReturn_t (*)(nvmlDevice_t, unsigned, int*)>(nvml.get(), "nvmlDeviceGetNvLinkState");
    auto remotePci = symbol<nvmlReturn_t (*)(nvmlDevice_t, unsigned, nvmlPciInfo_t*)>(nvml.get(), "nvmlDeviceGetNvLinkRemotePciInfo_v2");
    auto remoteType = symbol<nvmlReturn_t (*)(nvmlDevice_t, unsigned, int*)>(nvml.get(), "nvmlDeviceGetNvLinkRemoteDeviceType");
    auto driverVersion = symbol<nvmlReturn_t (*)(char*, unsigned)>(nvml.get(), "nvmlSystemGetDriverVersion");
    auto cudaVersion = symbol<nvmlReturn_t (*)(int*)>(nvml.get(), "nvmlSystemGetCudaDriverVersion_v2");
    if (!getCount || !getHandle || !getPci || !getAncestor || !getP2P) {
      return makeError("NVML: a required entry point is missing (driver too old?)");
    }

    std::array<char, 96> buf{};
    if (driverVersion && driverVersion(buf.data(), buf.size()) == NVML_SUCCESS) topo.host.driverVersion = buf.data();
    int cuda = 0;
    if (cudaVersion && cudaVersion(&cuda) == NVML_SUCCESS) {
      topo.host.cudaVersion = std::to_string(cuda / 1000) + "." + std::to_string(cuda % 1000 / 10);
    }
    unsigned count = 0;
    if (nvmlReturn_t r = getCount(&count); r != NVML_SUCCESS) return makeError("NVML: device count: " + why(r));

    std::vector<nvmlDevice_t> devices(count);
    std::vector<int> activeLinks(count, 0);
    std::vector<bool> switched(count, false);
    std::map<std::string, unsigned> byBusId;
    std::vector<std::map<std::string, int>> linksTo(count);  // direct links by remote bus id
    for (unsigned i = 0; i < count; ++i) {
      if (nvmlReturn_t r = getHandle(i, &devices[i]); r != NVML_SUCCESS) {
        return makeError("NVML: GPU " + std::to_string(i) + ": " + why(r));
      }
      GpuInfo gpu;
      gpu.index = static_cast<int>(i);
      if (getUuid && getUuid(devices[i], buf.data(), buf.size()) == NVML_SUCCESS) gpu.uuid = buf.data();
      if (getName && getName(devices[i], buf.data(), buf.size()) == NVML_SUCCESS) gpu.name = buf.data();
      nvmlPciInfo_t pci{};
      if (getPci(devices[i], &pci) == NVML_SUCCESS) gpu.pciBusId = pci.busId;
      byBusId[lower(gpu.pciBusId)] = i;
      nvmlMemory_t mem{};
      if (getMemory && getMemory(devices[i], &mem) == NVML_SUCCESS) gpu.memoryBytes = mem.total;
      unsigned numa = 0;
      if (getNuma && getNuma(devices[i], &numa) == NVML_SUCCESS) gpu.numaNode = static_cast<int>(numa);
      else gpu.numaNode = sysfsNumaNode(gpu.pciBusId);  // NVML says not supported on many hosts
      std::vector<unsigned long> mask(64, 0);
      if (getAffinity && getAffinity(devices[i], static_cast<unsigned>(mask.size()), mask.data()) == NVML_SUCCESS) {
        gpu.cpuAffinity = cpuList(mask);
        if (!gpu.numaNode) gpu.numaNode = numaFromCpus(mask);
      }
      for (unsigned link = 0; linkState && link < NVML_NVLINK_MAX_LINKS; ++link) {
        int active = 0;
        if (linkState(devices[i], link, &active) != NVML_SUCCESS || active != 1) continue;
        ++activeLinks[i];
        int type = -1;
        if (remoteType && remoteType(devices[i], link, &type) != NVML_SUCCESS) type = -1;
        nvmlPciInfo_t remote{};
        bool haveRemote = remotePci && remotePci(devices[i], link, &remote) == NVML_SUCCESS;
        // Through NVSwitch the remote is the switch, whose bus id reads FFFFFFFF:FF:FF.0.
        if (type == NVML_NVLINK_DEVICE_TYPE_SWITCH ||
            (haveRemote && lower(remote.busId).starts_with("ffffffff:ff:ff"))) {
          switched[i] = true;
          continue;
        }
        if (haveRemote && (type == NVML_NVLINK_DEVICE_TYPE_GPU || type == -1)) ++linksTo[i][lower(remote.busId)];
      }
      topo.gpus.push_back(std::move(gpu));
    }

    auto peers = cudaPeerAccess(topo.gpus);
    for (unsigned a = 0; a < count; ++a) {
      for (unsigned b = a + 1; b < count; ++b) {
        GpuPair pair;
        pair.a = static_cast<int>(a);
        pair.b = static_cast<int>(b);
        int level = -1;
        if (getAncestor(devices[a], devices[b], &level) == NVML_SUCCESS) pair.pcie = pcieWord(level);
        auto p2p = [&](int caps) {
          int status = 6;
          if (getP2P(devices[a], devices[b], caps, &status) != NVML_SUCCESS) status = 6;
          return p2pWord(status);
        };
        pair.p2p.read = p2p(NVML_P2P_CAPS_INDEX_READ);
        pair.p2p.write = p2p(NVML_P2P_CAPS_INDEX_WRITE);
        pair.p2p.atomics = p2p(NVML_P2P_CAPS_INDEX_ATOMICS);
        // Direct links name the peer's bus id; through NVSwitch every remote is the
        // switch, and NVML's NVLINK P2P capability tells whether the pair is joined.
        auto direct = linksTo[a].find(lower(topo.gpus[b].pciBusId));
        if (direct != linksTo[a].end()) {
          pair.nvlinks = direct->second;
        } else if (switched[a] && switched[b]) {
          int nvlinkStatus = 6;
          if (getP2P(devices[a], devices[b], NVML_P2P_CAPS_INDEX_NVLINK, &nvlinkStatus) == NVML_SUCCESS &&
              nvlinkStatus == 0) {
            pair.nvlinks = std::min(activeLinks[a], activeLinks[b]);
          }
        }
        pair.link = pair.nvlinks > 0 ? "NV" + std::to_string(pair.nvlinks) : pair.pcie;
        auto ab = peers.find({topo.gpus[a].pciBusId, topo.gpus[b].pciBusId});
        if (ab != peers.end()) pair.cudaPeerAccess = ab->second;
        topo.pairs.push_back(std::move(pair));
      }
    }
    if (measureBandwidth_ && !topo.pairs.empty()) {
      // Copies would slow a running job and be slowed by it: measure idle GPUs only.
      auto running = symbol<nvmlReturn_t (*)(nvmlDevice_t, unsigned*, void*)>(nvml.get(),
                                                                               "nvmlDeviceGetComputeRunningProcesses_v3");
      bool busy = false;
      for (unsigned i = 0; running && i < count; ++i) {
        unsigned n = 0;
        if (running(devices[i], &n, nullptr) != NVML_SUCCESS || n > 0) busy = true;
      }
      if (busy || !running) {
        spdlog::warn("agent: bandwidth not measured: a compute process is running on a GPU (or NVML cannot tell)");
      } else if (auto measured = measureBandwidth(topo); !measured) {
        spdlog::warn("agent: {}", measured.error().message);
      }
    }
    return topo;
  }

 private:
  // cuDeviceCanAccessPeer both ways, keyed by NVML bus ids (CUDA may order GPUs
  // differently). Empty when libcuda is not there.
  bool measureBandwidth_;

  std::map<std::pair<std::string, std::string>, bool> cudaPeerAccess(const std::vector<GpuInfo>& gpus) {
    std::map<std::pair<std::string, std::string>, bool> out;
    Library cuda(dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL));
    if (!cuda) {
      spdlog::warn("agent: libcuda.so.1 not loadable: cudaPeerAccess left unknown");
      return out;
    }
    auto cuInit = symbol<int (*)(unsigned)>(cuda.get(), "cuInit");
    auto cuCount = symbol<int (*)(int*)>(cuda.get(), "cuDeviceGetCount");
    auto cuGet = symbol<int (*)(int*, int)>(cuda.get(), "cuDeviceGet");
    auto cuBusId = symbol<int (*)(char*, int, int)>(cuda.get(), "cuDeviceGetPCIBusId");
    auto cuCanAccess = symbol<int (*)(int*, int, int)>(cuda.get(), "cuDeviceCanAccessPeer");
    int n = 0;
    if (!cuInit || !cuCount || !cuGet || !cuBusId || !cuCanAccess || cuInit(0) != 0 || cuCount(&n) != 0) {
      spdlog::warn("agent: CUDA driver not usable: cudaPeerAccess left unknown");
      return out;
    }
    std::vector<int> dev(n);
    std::vector<std::string> bus(n);
    for (int i = 0; i < n; ++i) {
      char id[32] = {};
      if (cuGet(&dev[i], i) != 0 || cuBusId(id, sizeof id, dev[i]) != 0) return out;
      bus[i] = id;
    }
    auto same = [](const std::string& nvmlId, const std::string& cudaId) {
      return sysfsBusId(nvmlId) == sysfsBusId(cudaId);
    };
    for (const auto& a : gpus) {
      for (const auto& b : gpus) {
        int ia = -1, ib = -1;
        for (int i = 0; i < n; ++i) {
          if (same(a.pciBusId, bus[i])) ia = i;
          if (same(b.pciBusId, bus[i])) ib = i;
        }
        if (ia < 0 || ib < 0 || ia == ib) continue;
        int ab = 0, ba = 0;
        if (cuCanAccess(&ab, dev[ia], dev[ib]) == 0 && cuCanAccess(&ba, dev[ib], dev[ia]) == 0) {
          out[{a.pciBusId, b.pciBusId}] = ab == 1 && ba == 1;
        }
      }
    }
    return out;
  }
};

}  // namespace

std::unique_ptr<Backend> makeNvmlBackend(bool measureBandwidth) {
  return std::make_unique<NvmlBackend>(measureBandwidth);
}

}  // namespace podshaper::agent
