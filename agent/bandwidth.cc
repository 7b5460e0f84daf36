#include "agent/bandwidth.h"

#include <dlfcn.h>

#include <memory>
#include <string>
#include <vector>

namespace podshaper::agent {
namespace {

using CUresult = int;
using CUdevice = int;
using CUcontext = struct CUctx_st*;
using CUstream = struct CUstream_st*;
using CUevent = struct CUevent_st*;
using CUdeviceptr = unsigned long long;
constexpr CUresult CUDA_SUCCESS = 0, CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED = 704;
constexpr std::size_t kBytes = 256ULL << 20;
constexpr int kWarmups = 3, kCopies = 10;

struct DlClose {
  void operator()(void* h) const { if (h) dlclose(h); }
};

struct Cuda {
  CUresult (*init)(unsigned);
  CUresult (*deviceGet)(CUdevice*, int);
  CUresult (*deviceGetCount)(int*);
  CUresult (*busId)(char*, int, CUdevice);
  CUresult (*retain)(CUcontext*, CUdevice);
  CUresult (*release)(CUdevice);
  CUresult (*setCurrent)(CUcontext);
  CUresult (*enablePeer)(CUcontext, unsigned);
  CUresult (*disablePeer)(CUcontext);
  CUresult (*memAlloc)(CUdeviceptr*, std::size_t);
  CUresult (*memFree)(CUdeviceptr);
  CUresult (*streamCreate)(CUstream*, unsigned);
  CUresult (*streamDestroy)(CUstream);
  CUresult (*eventCreate)(CUevent*, unsigned);
  CUresult (*eventRecord)(CUevent, CUstream);
  CUresult (*eventSync)(CUevent);
  CUresult (*eventElapsed)(float*, CUevent, CUevent);
  CUresult (*eventDestroy)(CUevent);
  CUresult (*copyPeer)(CUdeviceptr, CUcontext, CUdeviceptr, CUcontext, std::size_t, CUstream);
};

template <class F>
bool load(void* lib, F& fn, const char* name) {
  fn = reinterpret_cast<F>(dlsym(lib, name));
  return fn != nullptr;
}

std::string norm(std::string id) {
  for (char& c : id) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  auto colon = id.find(':');
  if (colon != std::string::npos && colon > 4) id = id.substr(colon - 4);
  return id;
}

// GB/s one way from `src` to `dst` (both CUDA ordinals' primary contexts).
Result<double> copyRate(const Cuda& cu, CUcontext srcCtx, CUcontext dstCtx) {
  if (cu.setCurrent(dstCtx) != CUDA_SUCCESS) return makeError("cuCtxSetCurrent");
  CUdeviceptr dst = 0;
  if (cu.memAlloc(&dst, kBytes) != CUDA_SUCCESS) return makeError("cuMemAlloc on the destination");
  if (cu.setCurrent(srcCtx) != CUDA_SUCCESS) return makeError("cuCtxSetCurrent");
  CUdeviceptr src = 0;
  CUstream stream = nullptr;
  CUevent start = nullptr, stop = nullptr;
  double rate = -1;
  std::string error;
  CUresult peer = cu.enablePeer(dstCtx, 0);
  bool enabledHere = peer == CUDA_SUCCESS;
  if (cu.memAlloc(&src, kBytes) != CUDA_SUCCESS || cu.streamCreate(&stream, 0) != CUDA_SUCCESS ||
      cu.eventCreate(&start, 0) != CUDA_SUCCESS || cu.eventCreate(&stop, 0) != CUDA_SUCCESS) {
    error = "allocation on the source";
  } else {
    for (int i = 0; i < kWarmups; ++i) cu.copyPeer(dst, dstCtx, src, srcCtx, kBytes, stream);
    cu.eventRecord(start, stream);
    for (int i = 0; i < kCopies; ++i) cu.copyPeer(dst, dstCtx, src, srcCtx, kBytes, stream);
    cu.eventRecord(stop, stream);
    float ms = 0;
    if (cu.eventSync(stop) == CUDA_SUCCESS && cu.eventElapsed(&ms, start, stop) == CUDA_SUCCESS && ms > 0) {
      rate = static_cast<double>(kBytes) * kCopies / (ms / 1000.0) / 1e9;
    } else {
      error = "timing the copies";
    }
  }
  if (stop) cu.eventDestroy(stop);
  if (start) cu.eventDestroy(start);
  if (stream) cu.streamDestroy(stream);
  if (src) cu.memFree(src);
  if (enabledHere) cu.disablePeer(dstCtx);
  (void)peer;
  cu.setCurrent(dstCtx);
  cu.memFree(dst);
  cu.setCurrent(nullptr);
  if (rate < 0) return makeError(error);
  return rate;
}

}  // namespace

Result<void> measureBandwidth(Topology& topology) {
  std::unique_ptr<void, DlClose> lib(dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL));
  if (!lib) return makeError("libcuda.so.1 is not loadable");
  Cuda cu{};
  void* h = lib.get();
  bool ok = load(h, cu.init, "cuInit") && load(h, cu.deviceGet, "cuDeviceGet") &&
            load(h, cu.deviceGetCount, "cuDeviceGetCount") && load(h, cu.busId, "cuDeviceGetPCIBusId") &&
            load(h, cu.retain, "cuDevicePrimaryCtxRetain") && load(h, cu.release, "cuDevicePrimaryCtxRelease_v2") &&
            load(h, cu.setCurrent, "cuCtxSetCurrent") && load(h, cu.enablePeer, "cuCtxEnablePeerAccess") &&
            load(h, cu.disablePeer, "cuCtxDisablePeerAccess") && load(h, cu.memAlloc, "cuMemAlloc_v2") &&
            load(h, cu.memFree, "cuMemFree_v2") && load(h, cu.streamCreate, "cuStreamCreate") &&
            load(h, cu.streamDestroy, "cuStreamDestroy_v2") && load(h, cu.eventCreate, "cuEventCreate") &&
            load(h, cu.eventRecord, "cuEventRecord") && load(h, cu.eventSync, "cuEventSynchronize") &&
            load(h, cu.eventElapsed, "cuEventElapsedTime") && load(h, cu.eventDestroy, "cuEventDestroy_v2") &&
            load(h, cu.copyPeer, "cuMemcpyPeerAsync");
  int count = 0;
  if (!ok || cu.init(0) != CUDA_SUCCESS || cu.deviceGetCount(&count) != CUDA_SUCCESS) {
    return makeError("the CUDA driver API is not usable");
  }
  // CUDA's ordinals by NVML index, matched on PCI bus id.
  std::vector<int> ordinal(topology.gpus.size(), -1);
  std::vector<CUdevice> devices(count);
  for (int i = 0; i < count; ++i) {
    char id[32] = {};
    if (cu.deviceGet(&devices[i], i) != CUDA_SUCCESS || cu.busId(id, sizeof id, devices[i]) != CUDA_SUCCESS) continue;
    for (std::size_t g = 0; g < topology.gpus.size(); ++g) {
      if (norm(topology.gpus[g].pciBusId) == norm(id)) ordinal[g] = i;
    }
  }
  std::vector<CUcontext> contexts(count, nullptr);
  for (int i = 0; i < count; ++i) {
    if (cu.retain(&contexts[i], devices[i]) != CUDA_SUCCESS) contexts[i] = nullptr;
  }
  std::string failure;
  for (auto& pair : topology.pairs) {
    int a = ordinal[pair.a], b = ordinal[pair.b];
    if (a < 0 || b < 0 || !contexts[a] || !contexts[b]) continue;
    auto ab = copyRate(cu, contexts[a], contexts[b]);
    auto ba = copyRate(cu, contexts[b], contexts[a]);
    if (ab && ba) pair.bandwidthGBps = (*ab + *ba) / 2;
    else failure = (ab ? ba.error() : ab.error()).message;
  }
  for (int i = 0; i < count; ++i) {
    if (contexts[i]) cu.release(devices[i]);
  }
  if (!failure.empty()) return makeError("bandwidth: " + failure);
  return {};
}

}  // namespace podshaper::agent
