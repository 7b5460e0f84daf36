#include "agent/nvml_lib.h"

#include <dlfcn.h>

#include <algorithm>
#include <array>
#include <iterator>
#include <fstream>
#include <sstream>
#include <string>
#include <utility>

#include "agent/bandwidth.h"

namespace podshaper::agent {
namespace {

constexpr nvmlReturn_t NVML_SUCCESS = 0;
constexpr CUresult CUDA_SUCCESS = 0;

template <class F>
void symbol(void* lib, F& fn, const char* name) {
  fn = reinterpret_cast<F>(dlsym(lib, name));
}

// The members both versions of NVML's fabric info have.
template <class Info>
GpuFabricInfo fabricInfo(const Info& info) {
  GpuFabricInfo out;
  std::copy(std::begin(info.clusterUuid), std::end(info.clusterUuid), out.clusterUuid.begin());
  out.status = info.status;
  out.cliqueId = info.cliqueId;
  out.state = info.state;
  return out;
}
// nvml.h's layout, which the version word encodes.
static_assert(sizeof(nvmlGpuFabricInfo_v2_t) == 36 && nvmlGpuFabricInfo_v2 == 0x02000024);

// NVML's largest buffer for a UUID, a device name or the driver version (nvml.h's *_V2_BUFFER_SIZE).
using Text = std::array<char, 96>;

}  // namespace

GpuSources nodeGpuSources(std::string sysfsRoot) {
  GpuSources sources;
  sources.openNvml = []() -> Result<std::unique_ptr<Nvml>, NvmlOpenError> {
    auto lib = NvmlLib::open();
    if (!lib) return lib.error();
    return std::unique_ptr<Nvml>(std::move(*lib));
  };
  sources.openCuda = []() -> Result<std::unique_ptr<Cuda>> {
    auto lib = CudaLib::open();
    if (!lib) return lib.error();
    return std::unique_ptr<Cuda>(std::move(*lib));
  };
  sources.measureBandwidth = measureBandwidth;
  sources.readSysfs = [root = std::move(sysfsRoot)](const std::string& path) -> std::optional<std::string> {
    std::ifstream in(root + "/" + path);
    if (!in) return std::nullopt;
    std::ostringstream text;
    text << in.rdbuf();
    return text.str();
  };
  return sources;
}

Result<std::unique_ptr<NvmlLib>, NvmlOpenError> NvmlLib::open() {
  void* handle = dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL);
  if (!handle) {
    const char* why = dlerror();
    return nvmlOpenError(NvmlOpenError::Kind::kNotLoadable,
                     std::string("libnvidia-ml.so.1 not loadable (") + (why ? why : "") + ")");
  }
  std::unique_ptr<NvmlLib> lib(new NvmlLib(handle));
  symbol(handle, lib->init_, "nvmlInit_v2");
  symbol(handle, lib->shutdown_, "nvmlShutdown");
  symbol(handle, lib->errorString_, "nvmlErrorString");
  symbol(handle, lib->getCount_, "nvmlDeviceGetCount_v2");
  symbol(handle, lib->getHandle_, "nvmlDeviceGetHandleByIndex_v2");
  symbol(handle, lib->getUuid_, "nvmlDeviceGetUUID");
  symbol(handle, lib->getName_, "nvmlDeviceGetName");
  symbol(handle, lib->getPci_, "nvmlDeviceGetPciInfo_v3");
  symbol(handle, lib->getMemory_, "nvmlDeviceGetMemoryInfo");
  symbol(handle, lib->getNuma_, "nvmlDeviceGetNumaNodeId");
  symbol(handle, lib->getAffinity_, "nvmlDeviceGetCpuAffinity");
  symbol(handle, lib->getAncestor_, "nvmlDeviceGetTopologyCommonAncestor");
  symbol(handle, lib->getP2P_, "nvmlDeviceGetP2PStatus");
  symbol(handle, lib->linkState_, "nvmlDeviceGetNvLinkState");
  symbol(handle, lib->remotePci_, "nvmlDeviceGetNvLinkRemotePciInfo_v2");
  symbol(handle, lib->remoteType_, "nvmlDeviceGetNvLinkRemoteDeviceType");
  symbol(handle, lib->driverVersion_, "nvmlSystemGetDriverVersion");
  symbol(handle, lib->cudaVersion_, "nvmlSystemGetCudaDriverVersion_v2");
  symbol(handle, lib->running_, "nvmlDeviceGetComputeRunningProcesses_v3");
  // Either or none: a driver without them has no multi-node NVLink to tell of.
  symbol(handle, lib->fabricV_, "nvmlDeviceGetGpuFabricInfoV");
  symbol(handle, lib->fabric_, "nvmlDeviceGetGpuFabricInfo");
  if (!lib->init_ || !lib->shutdown_) {
    return nvmlOpenError(NvmlOpenError::Kind::kIncomplete, "NVML: nvmlInit_v2/nvmlShutdown missing from libnvidia-ml.so.1");
  }
  if (nvmlReturn_t r = lib->init_(); r != NVML_SUCCESS) {
    return nvmlOpenError(NvmlOpenError::Kind::kInitFailed, "nvmlInit failed: " + lib->why(r));
  }
  lib->initialized_ = true;
  // The getters call these without looking: a driver without them is too old to describe its GPUs.
  if (!lib->getCount_ || !lib->getHandle_ || !lib->getPci_ || !lib->getAncestor_ || !lib->getP2P_) {
    return nvmlOpenError(NvmlOpenError::Kind::kIncomplete, "NVML: a required entry point is missing (driver too old?)");
  }
  return lib;
}

NvmlLib::~NvmlLib() {
  if (initialized_) shutdown_();
  dlclose(handle_);
}

std::string NvmlLib::why(nvmlReturn_t r) const {
  return std::string(errorString_ ? errorString_(r) : "error") + " (" + std::to_string(r) + ")";
}

std::optional<std::string> NvmlLib::driverVersion() const {
  Text buf{};
  if (!driverVersion_ || driverVersion_(buf.data(), buf.size()) != NVML_SUCCESS) return std::nullopt;
  return buf.data();
}

std::optional<int> NvmlLib::cudaDriverVersion() const {
  int version = 0;
  if (!cudaVersion_ || cudaVersion_(&version) != NVML_SUCCESS) return std::nullopt;
  return version;
}

Result<unsigned> NvmlLib::deviceCount() const {
  unsigned count = 0;
  if (nvmlReturn_t r = getCount_(&count); r != NVML_SUCCESS) return makeError("NVML: device count: " + why(r));
  return count;
}

Result<nvmlDevice_t> NvmlLib::deviceByIndex(unsigned index) const {
  nvmlDevice_t device = nullptr;
  if (nvmlReturn_t r = getHandle_(index, &device); r != NVML_SUCCESS) {
    return makeError("NVML: GPU " + std::to_string(index) + ": " + why(r));
  }
  return device;
}

std::optional<std::string> NvmlLib::uuid(nvmlDevice_t device) const {
  Text buf{};
  if (!getUuid_ || getUuid_(device, buf.data(), buf.size()) != NVML_SUCCESS) return std::nullopt;
  return buf.data();
}

std::optional<std::string> NvmlLib::name(nvmlDevice_t device) const {
  Text buf{};
  if (!getName_ || getName_(device, buf.data(), buf.size()) != NVML_SUCCESS) return std::nullopt;
  return buf.data();
}

std::optional<std::string> NvmlLib::pciBusId(nvmlDevice_t device) const {
  nvmlPciInfo_t pci{};
  if (getPci_(device, &pci) != NVML_SUCCESS) return std::nullopt;
  return pci.busId;
}

std::optional<uint64_t> NvmlLib::memoryTotal(nvmlDevice_t device) const {
  nvmlMemory_t memory{};
  if (!getMemory_ || getMemory_(device, &memory) != NVML_SUCCESS) return std::nullopt;
  return memory.total;
}

std::optional<unsigned> NvmlLib::numaNode(nvmlDevice_t device) const {
  unsigned node = 0;
  if (!getNuma_ || getNuma_(device, &node) != NVML_SUCCESS) return std::nullopt;
  return node;
}

std::optional<std::vector<unsigned long>> NvmlLib::cpuAffinity(nvmlDevice_t device, unsigned words) const {
  std::vector<unsigned long> mask(words, 0);
  if (!getAffinity_ || getAffinity_(device, words, mask.data()) != NVML_SUCCESS) return std::nullopt;
  return mask;
}

bool NvmlLib::computeIdle(nvmlDevice_t device) const {
  // With no room for the list NVML answers success only when there is nothing to list.
  unsigned count = 0;
  return running_ && running_(device, &count, nullptr) == NVML_SUCCESS && count == 0;
}

std::optional<int> NvmlLib::commonAncestor(nvmlDevice_t a, nvmlDevice_t b) const {
  int level = -1;
  if (getAncestor_(a, b, &level) != NVML_SUCCESS) return std::nullopt;
  return level;
}

int NvmlLib::p2pStatus(nvmlDevice_t a, nvmlDevice_t b, int capsIndex) const {
  int status = NVML_P2P_STATUS_UNKNOWN;
  if (getP2P_(a, b, capsIndex, &status) != NVML_SUCCESS) return NVML_P2P_STATUS_UNKNOWN;
  return status;
}

bool NvmlLib::nvLinkActive(nvmlDevice_t device, unsigned link) const {
  int active = 0;
  return linkState_ && linkState_(device, link, &active) == NVML_SUCCESS && active == 1;
}

std::optional<int> NvmlLib::nvLinkRemoteType(nvmlDevice_t device, unsigned link) const {
  int type = -1;
  if (!remoteType_ || remoteType_(device, link, &type) != NVML_SUCCESS) return std::nullopt;
  return type;
}

std::optional<std::string> NvmlLib::nvLinkRemoteBusId(nvmlDevice_t device, unsigned link) const {
  nvmlPciInfo_t remote{};
  if (!remotePci_ || remotePci_(device, link, &remote) != NVML_SUCCESS) return std::nullopt;
  return remote.busId;
}

std::optional<GpuFabricInfo> NvmlLib::gpuFabricInfo(nvmlDevice_t device) const {
  if (fabricV_) {
    nvmlGpuFabricInfo_v2_t info{};
    info.version = nvmlGpuFabricInfo_v2;
    if (fabricV_(device, &info) != NVML_SUCCESS) return std::nullopt;
    GpuFabricInfo out = fabricInfo(info);
    out.healthMask = info.healthMask;
    return out;
  }
  nvmlGpuFabricInfo_t info{};
  if (!fabric_ || fabric_(device, &info) != NVML_SUCCESS) return std::nullopt;
  return fabricInfo(info);
}

Result<std::unique_ptr<CudaLib>> CudaLib::open() {
  void* handle = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
  if (!handle) return makeError("libcuda.so.1 not loadable");
  std::unique_ptr<CudaLib> lib(new CudaLib(handle));
  CUresult (*init)(unsigned) = nullptr;
  CUresult (*getCount)(int*) = nullptr;
  symbol(handle, init, "cuInit");
  symbol(handle, getCount, "cuDeviceGetCount");
  symbol(handle, lib->deviceGet_, "cuDeviceGet");
  symbol(handle, lib->busId_, "cuDeviceGetPCIBusId");
  symbol(handle, lib->canAccessPeer_, "cuDeviceCanAccessPeer");
  if (!init || !getCount || !lib->deviceGet_ || !lib->busId_ || !lib->canAccessPeer_ || init(0) != CUDA_SUCCESS ||
      getCount(&lib->count_) != CUDA_SUCCESS) {
    return makeError("CUDA driver not usable");
  }
  return lib;
}

CudaLib::~CudaLib() { dlclose(handle_); }

std::optional<Cuda::Device> CudaLib::device(int ordinal) const {
  Device device{};
  char busId[32] = {};
  if (deviceGet_(&device.handle, ordinal) != CUDA_SUCCESS) return std::nullopt;
  if (busId_(busId, sizeof busId, device.handle) != CUDA_SUCCESS) return std::nullopt;
  device.busId = busId;
  return device;
}

std::optional<bool> CudaLib::canAccessPeer(CUdevice device, CUdevice peer) const {
  int can = 0;
  if (canAccessPeer_(&can, device, peer) != CUDA_SUCCESS) return std::nullopt;
  return can == 1;
}

}  // namespace podshaper::agent
