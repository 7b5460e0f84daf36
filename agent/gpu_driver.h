#pragma once

// What the agent asks of NVML and of the CUDA driver, as interfaces: the dlopen
// libraries (agent/nvml_lib.h) answer on a GPU node; a recording of their answers
// (agent/gpu_recording.h) answers in tests and in `podshaper-agent probe --recording`.
// The few types and enums used are declared here as NVML's and CUDA's headers do.
// What the answers mean is nvml_backend.cc's business.
#include <array>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "api/topology.h"
#include "base/result.h"

namespace podshaper::agent {

using nvmlReturn_t = int;
using nvmlDevice_t = struct nvmlDevice_st*;
constexpr unsigned NVML_NVLINK_MAX_LINKS = 18;

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

// nvmlGpuFabricState_t
constexpr unsigned char NVML_GPU_FABRIC_STATE_NOT_SUPPORTED = 0, NVML_GPU_FABRIC_STATE_NOT_STARTED = 1,
                        NVML_GPU_FABRIC_STATE_IN_PROGRESS = 2, NVML_GPU_FABRIC_STATE_COMPLETED = 3;

// What nvmlDeviceGetGpuFabricInfoV (or, on older drivers, nvmlDeviceGetGpuFabricInfo) says of
// a GPU's place in a multi-node NVLink fabric, as NVML answered it: the cluster UUID's 16
// bytes, NVML's status of the GPU's registration, the clique, the state
// (NVML_GPU_FABRIC_STATE_*) and, from the V entry point only, the health mask.
struct GpuFabricInfo {
  std::array<unsigned char, 16> clusterUuid{};
  nvmlReturn_t status = 0;
  unsigned cliqueId = 0;
  unsigned char state = NVML_GPU_FABRIC_STATE_NOT_SUPPORTED;
  std::optional<unsigned> healthMask;
  bool operator==(const GpuFabricInfo&) const = default;
};

// Why NVML could not be opened. The message says what, without the agent's
// verdict: a node without a driver, or with one that will not start, has no GPUs
// to report; a driver without the entry points the agent needs is an error.
struct NvmlOpenError : Error {
  enum class Kind { kNotLoadable, kInitFailed, kIncomplete };
  Kind kind = Kind::kIncomplete;
};
inline NvmlOpenError nvmlOpenError(NvmlOpenError::Kind kind, std::string message) {
  NvmlOpenError error;
  error.message = std::move(message);
  error.kind = kind;
  return error;
}

// NVML's answers, opened and initialized for the object's life. An entry point
// an older driver lacks makes its getter answer nothing (nullopt, false), as a
// failed call does.
class Nvml {
 public:
  virtual ~Nvml() = default;

  virtual std::optional<std::string> driverVersion() const = 0;
  virtual std::optional<int> cudaDriverVersion() const = 0;  // 12040 for CUDA 12.4
  virtual Result<unsigned> deviceCount() const = 0;          // error: NVML: device count: <why>
  virtual Result<nvmlDevice_t> deviceByIndex(unsigned index) const = 0;  // error: NVML: GPU <index>: <why>

  virtual std::optional<std::string> uuid(nvmlDevice_t device) const = 0;
  virtual std::optional<std::string> name(nvmlDevice_t device) const = 0;
  virtual std::optional<std::string> pciBusId(nvmlDevice_t device) const = 0;  // "00000000:18:00.0"
  virtual std::optional<uint64_t> memoryTotal(nvmlDevice_t device) const = 0;
  virtual std::optional<unsigned> numaNode(nvmlDevice_t device) const = 0;
  // A CPU bitmask of `words` unsigned longs, CPU 0 the lowest bit of the first.
  virtual std::optional<std::vector<unsigned long>> cpuAffinity(nvmlDevice_t device, unsigned words) const = 0;
  // false when a compute process runs, or NVML cannot tell
  virtual bool computeIdle(nvmlDevice_t device) const = 0;

  virtual std::optional<int> commonAncestor(nvmlDevice_t a, nvmlDevice_t b) const = 0;  // an NVML_TOPOLOGY_* level
  virtual int p2pStatus(nvmlDevice_t a, nvmlDevice_t b, int capsIndex) const = 0;  // NVML_P2P_STATUS_UNKNOWN on failure

  virtual bool nvLinkActive(nvmlDevice_t device, unsigned link) const = 0;
  virtual std::optional<int> nvLinkRemoteType(nvmlDevice_t device, unsigned link) const = 0;  // NVML_NVLINK_DEVICE_TYPE_*
  virtual std::optional<std::string> nvLinkRemoteBusId(nvmlDevice_t device, unsigned link) const = 0;
  // nothing: neither fabric entry point (a driver before 550), or the call failed (NOT_SUPPORTED
  // on a GPU without a fabric)
  virtual std::optional<GpuFabricInfo> gpuFabricInfo(nvmlDevice_t device) const = 0;
};

using CUdevice = int;

// The CUDA driver's devices and cuDeviceCanAccessPeer, initialized (cuInit) and
// its devices counted when opened.
class Cuda {
 public:
  virtual ~Cuda() = default;

  struct Device {
    CUdevice handle;
    std::string busId;  // cuDeviceGetPCIBusId: "0000:18:00.0"
  };
  virtual int deviceCount() const = 0;
  virtual std::optional<Device> device(int ordinal) const = 0;  // cuDeviceGet and cuDeviceGetPCIBusId
  virtual std::optional<bool> canAccessPeer(CUdevice device, CUdevice peer) const = 0;
};

// A fabric cluster UUID's 16 bytes as text, "9277d399-0674-44a9-b64e-d85bb19ce2b0" (as GFD's
// nvidia.com/gpu.clique label writes it), and back: nothing unless text is such a UUID.
std::string uuidText(const std::array<unsigned char, 16>& bytes);
std::optional<std::array<unsigned char, 16>> uuidBytes(const std::string& text);

// The sysfs files the backend reads, by their path under /sys: a GPU's NUMA node by its
// NVML bus id ("00000000:18:00.0" → bus/pci/devices/0000:18:00.0/numa_node), and a NUMA
// node's CPUs (devices/system/node/node<N>/cpulist), read from node 0 up to the first missing.
std::string sysfsNumaNodePath(const std::string& nvmlBusId);
std::string sysfsCpuListPath(int numaNode);
constexpr int kMaxNumaNodes = 1024;
// The words of a GPU's CPU affinity the backend asks for: CPUs 0 to 4095.
constexpr unsigned kAffinityWords = 64;

// Where the backend gets its answers: NVML, the CUDA driver and sysfs.
struct GpuSources {
  std::function<Result<std::unique_ptr<Nvml>, NvmlOpenError>()> openNvml;
  std::function<Result<std::unique_ptr<Cuda>>()> openCuda;
  // A sysfs file's text by its path under /sys ("bus/pci/devices/0000:18:00.0/numa_node"), or nothing.
  std::function<std::optional<std::string>(const std::string& path)> readSysfs;
  // Copies between every pair of GPUs and sets each pair's bandwidthGBps (agent/bandwidth.h).
  std::function<Result<void>(Topology& topology)> measureBandwidth;
};
// The node's own: libnvidia-ml.so.1 and libcuda.so.1 loaded with dlopen, and the
// files under sysfsRoot.
GpuSources nodeGpuSources(std::string sysfsRoot = "/sys");

}  // namespace podshaper::agent
