#pragma once

// NVML (libnvidia-ml.so.1) and the CUDA driver's peer-access queries (libcuda.so.1)
// through dlopen, so the agent builds without a CUDA toolkit and runs on nodes
// without one. The few entry points, structs and enums used are declared here, as
// NVML's and CUDA's headers do. What the answers mean is nvml_backend.cc's business.
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "base/result.h"

namespace podshaper::agent {

using nvmlReturn_t = int;
using nvmlDevice_t = struct nvmlDevice_st*;
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
// nvmlGpuP2PCapsIndex_t
constexpr int NVML_P2P_CAPS_INDEX_READ = 0, NVML_P2P_CAPS_INDEX_WRITE = 1, NVML_P2P_CAPS_INDEX_NVLINK = 2,
              NVML_P2P_CAPS_INDEX_ATOMICS = 3;
// nvmlGpuP2PStatus_t: OK, five ways of not OK (1 to 5), unknown.
constexpr int NVML_P2P_STATUS_OK = 0, NVML_P2P_STATUS_UNKNOWN = 6;
// nvmlIntNvLinkDeviceType_t
constexpr int NVML_NVLINK_DEVICE_TYPE_GPU = 0, NVML_NVLINK_DEVICE_TYPE_SWITCH = 2;

// Why NvmlLib::open gave no library. The message says what, without the agent's
// verdict: a node without a driver, or with one that will not start, has no GPUs
// to report; a driver without the entry points the agent needs is an error.
struct NvmlOpenError : Error {
  enum class Kind { kNotLoadable, kInitFailed, kIncomplete };
  Kind kind = Kind::kIncomplete;
};

// libnvidia-ml.so.1, loaded and initialized (nvmlInit_v2) for the object's life
// and shut down (nvmlShutdown) and unloaded with it. Every symbol is looked up
// once, in open(). Entry points an older driver may lack make their getter
// answer nothing (nullopt, false), as a failed call does.
class NvmlLib {
 public:
  // Errors, by kind:
  //   kNotLoadable  libnvidia-ml.so.1 not loadable (<dlerror>)
  //   kInitFailed   nvmlInit failed: <NVML's words> (<code>)
  //   kIncomplete   NVML: nvmlInit_v2/nvmlShutdown missing from libnvidia-ml.so.1
  //                 NVML: a required entry point is missing (driver too old?)
  static Result<std::unique_ptr<NvmlLib>, NvmlOpenError> open();
  ~NvmlLib();
  NvmlLib(const NvmlLib&) = delete;
  NvmlLib& operator=(const NvmlLib&) = delete;

  std::optional<std::string> driverVersion() const;
  std::optional<int> cudaDriverVersion() const;  // 12040 for CUDA 12.4
  Result<unsigned> deviceCount() const;          // error: NVML: device count: <why>
  Result<nvmlDevice_t> deviceByIndex(unsigned index) const;  // error: NVML: GPU <index>: <why>

  std::optional<std::string> uuid(nvmlDevice_t device) const;
  std::optional<std::string> name(nvmlDevice_t device) const;
  std::optional<std::string> pciBusId(nvmlDevice_t device) const;  // "00000000:18:00.0"
  std::optional<uint64_t> memoryTotal(nvmlDevice_t device) const;
  std::optional<unsigned> numaNode(nvmlDevice_t device) const;
  // A CPU bitmask of `words` unsigned longs, CPU 0 the lowest bit of the first.
  std::optional<std::vector<unsigned long>> cpuAffinity(nvmlDevice_t device, unsigned words) const;
  bool computeIdle(nvmlDevice_t device) const;  // false when a compute process runs, or NVML cannot tell

  std::optional<int> commonAncestor(nvmlDevice_t a, nvmlDevice_t b) const;  // an NVML_TOPOLOGY_* level
  int p2pStatus(nvmlDevice_t a, nvmlDevice_t b, int capsIndex) const;        // NVML_P2P_STATUS_UNKNOWN on failure

  bool nvLinkActive(nvmlDevice_t device, unsigned link) const;
  std::optional<int> nvLinkRemoteType(nvmlDevice_t device, unsigned link) const;  // NVML_NVLINK_DEVICE_TYPE_*
  std::optional<std::string> nvLinkRemoteBusId(nvmlDevice_t device, unsigned link) const;

 private:
  explicit NvmlLib(void* handle) : handle_(handle) {}
  std::string why(nvmlReturn_t r) const;  // "<NVML's words> (<code>)"

  void* handle_;
  bool initialized_ = false;
  nvmlReturn_t (*init_)() = nullptr;
  nvmlReturn_t (*shutdown_)() = nullptr;
  const char* (*errorString_)(nvmlReturn_t) = nullptr;
  nvmlReturn_t (*getCount_)(unsigned*) = nullptr;
  nvmlReturn_t (*getHandle_)(unsigned, nvmlDevice_t*) = nullptr;
  nvmlReturn_t (*getUuid_)(nvmlDevice_t, char*, unsigned) = nullptr;
  nvmlReturn_t (*getName_)(nvmlDevice_t, char*, unsigned) = nullptr;
  nvmlReturn_t (*getPci_)(nvmlDevice_t, nvmlPciInfo_t*) = nullptr;
  nvmlReturn_t (*getMemory_)(nvmlDevice_t, nvmlMemory_t*) = nullptr;
  nvmlReturn_t (*getNuma_)(nvmlDevice_t, unsigned*) = nullptr;
  nvmlReturn_t (*getAffinity_)(nvmlDevice_t, unsigned, unsigned long*) = nullptr;
  nvmlReturn_t (*getAncestor_)(nvmlDevice_t, nvmlDevice_t, int*) = nullptr;
  nvmlReturn_t (*getP2P_)(nvmlDevice_t, nvmlDevice_t, int, int*) = nullptr;
  nvmlReturn_t (*linkState_)(nvmlDevice_t, unsigned, int*) = nullptr;
  nvmlReturn_t (*remotePci_)(nvmlDevice_t, unsigned, nvmlPciInfo_t*) = nullptr;
  nvmlReturn_t (*remoteType_)(nvmlDevice_t, unsigned, int*) = nullptr;
  nvmlReturn_t (*driverVersion_)(char*, unsigned) = nullptr;
  nvmlReturn_t (*cudaVersion_)(int*) = nullptr;
  nvmlReturn_t (*running_)(nvmlDevice_t, unsigned*, void*) = nullptr;
};

using CUresult = int;
using CUdevice = int;

// libcuda.so.1 for cuDeviceCanAccessPeer only, loaded, initialized (cuInit) and
// its devices counted in open(), unloaded with the object. bandwidth.cc loads
// its own copy for the copies it times.
class CudaLib {
 public:
  // Errors: "libcuda.so.1 not loadable", "CUDA driver not usable" (an entry point
  // missing, or cuInit or cuDeviceGetCount failed).
  static Result<std::unique_ptr<CudaLib>> open();
  ~CudaLib();
  CudaLib(const CudaLib&) = delete;
  CudaLib& operator=(const CudaLib&) = delete;

  struct Device {
    CUdevice handle;
    std::string busId;  // cuDeviceGetPCIBusId: "0000:18:00.0"
  };
  int deviceCount() const { return count_; }
  std::optional<Device> device(int ordinal) const;  // cuDeviceGet and cuDeviceGetPCIBusId
  std::optional<bool> canAccessPeer(CUdevice device, CUdevice peer) const;

 private:
  explicit CudaLib(void* handle) : handle_(handle) {}

  void* handle_;
  int count_ = 0;
  CUresult (*deviceGet_)(CUdevice*, int) = nullptr;
  CUresult (*busId_)(char*, int, CUdevice) = nullptr;
  CUresult (*canAccessPeer_)(int*, CUdevice, CUdevice) = nullptr;
};

}  // namespace podshaper::agent
