#pragma once

// NVML (libnvidia-ml.so.1) and the CUDA driver's peer-access queries (libcuda.so.1)
// through dlopen, so the agent builds without a CUDA toolkit and runs on nodes
// without one: the node's own answers to agent/gpu_driver.h's interfaces.
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "agent/gpu_driver.h"
#include "base/result.h"

namespace podshaper::agent {

struct nvmlPciInfo_t {
  char busIdLegacy[16];
  unsigned int domain, bus, device, pciDeviceId, pciSubSystemId;
  char busId[32];
};
struct nvmlMemory_t {
  unsigned long long total, free, used;
};
// nvml.h's nvmlGpuFabricInfo_t (v1, older drivers) and nvmlGpuFabricInfo_v2_t (from 550,
// asked with its version word: its size and 2 << 24, NVML_STRUCT_VERSION).
struct nvmlGpuFabricInfo_t {
  unsigned char clusterUuid[16];
  nvmlReturn_t status;
  unsigned int cliqueId;
  unsigned char state;
};
struct nvmlGpuFabricInfo_v2_t {
  unsigned int version;
  unsigned char clusterUuid[16];
  nvmlReturn_t status;
  unsigned int cliqueId;
  unsigned char state;
  unsigned int healthMask;
};
constexpr unsigned nvmlGpuFabricInfo_v2 = sizeof(nvmlGpuFabricInfo_v2_t) | (2u << 24);

// libnvidia-ml.so.1, loaded and initialized (nvmlInit_v2) for the object's life
// and shut down (nvmlShutdown) and unloaded with it. Every symbol is looked up
// once, in open().
class NvmlLib final : public Nvml {
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

  std::optional<std::string> driverVersion() const override;
  std::optional<int> cudaDriverVersion() const override;
  Result<unsigned> deviceCount() const override;
  Result<nvmlDevice_t> deviceByIndex(unsigned index) const override;

  std::optional<std::string> uuid(nvmlDevice_t device) const override;
  std::optional<std::string> name(nvmlDevice_t device) const override;
  std::optional<std::string> pciBusId(nvmlDevice_t device) const override;
  std::optional<uint64_t> memoryTotal(nvmlDevice_t device) const override;
  std::optional<unsigned> numaNode(nvmlDevice_t device) const override;
  std::optional<std::vector<unsigned long>> cpuAffinity(nvmlDevice_t device, unsigned words) const override;
  bool computeIdle(nvmlDevice_t device) const override;

  std::optional<int> commonAncestor(nvmlDevice_t a, nvmlDevice_t b) const override;
  int p2pStatus(nvmlDevice_t a, nvmlDevice_t b, int capsIndex) const override;

  bool nvLinkActive(nvmlDevice_t device, unsigned link) const override;
  std::optional<int> nvLinkRemoteType(nvmlDevice_t device, unsigned link) const override;
  std::optional<std::string> nvLinkRemoteBusId(nvmlDevice_t device, unsigned link) const override;
  std::optional<GpuFabricInfo> gpuFabricInfo(nvmlDevice_t device) const override;

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
  nvmlReturn_t (*fabricV_)(nvmlDevice_t, nvmlGpuFabricInfo_v2_t*) = nullptr;
  nvmlReturn_t (*fabric_)(nvmlDevice_t, nvmlGpuFabricInfo_t*) = nullptr;
};

using CUresult = int;

// libcuda.so.1 for cuDeviceCanAccessPeer only, loaded, initialized (cuInit) and
// its devices counted in open(), unloaded with the object. bandwidth.cc loads
// its own copy for the copies it times.
class CudaLib final : public Cuda {
 public:
  // Errors: "libcuda.so.1 not loadable", "CUDA driver not usable" (an entry point
  // missing, or cuInit or cuDeviceGetCount failed).
  static Result<std::unique_ptr<CudaLib>> open();
  ~CudaLib();
  CudaLib(const CudaLib&) = delete;
  CudaLib& operator=(const CudaLib&) = delete;

  int deviceCount() const override { return count_; }
  std::optional<Device> device(int ordinal) const override;
  std::optional<bool> canAccessPeer(CUdevice device, CUdevice peer) const override;

 private:
  explicit CudaLib(void* handle) : handle_(handle) {}

  void* handle_;
  int count_ = 0;
  CUresult (*deviceGet_)(CUdevice*, int) = nullptr;
  CUresult (*busId_)(char*, int, CUdevice) = nullptr;
  CUresult (*canAccessPeer_)(int*, CUdevice, CUdevice) = nullptr;
};

}  // namespace podshaper::agent
