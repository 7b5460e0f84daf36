#pragma once

// What NVML, the CUDA driver and sysfs answered on one node, as JSON, and
// GpuSources that answer the same again without a GPU. `podshaper-agent record`
// writes one on a GPU node (docs/hardware/<machine>/gpu-recording.json);
// `podshaper-agent probe --recording FILE` and the unit tests replay them.
//
// {"nvml": {"open": {"kind": "notLoadable|initFailed|incomplete", "message": "..."}}}   (NVML could not be opened)
// {"nvml": {"driverVersion": "550.54.15", "cudaDriverVersion": 12040,
//           "deviceCount": 2 | {"error": "NVML: device count: ..."},
//           "gpus": [{"error": "NVML: GPU 0: ..."} |
//                    {"uuid": "GPU-…", "name": "NVIDIA H100 80GB HBM3", "pciBusId": "00000000:18:00.0",
//                     "memoryTotal": 85520809984, "numaNode": 0, "cpuAffinity": [4294967295], "computeIdle": true,
//                     "nvlinks": [{"link": 0, "active": true, "remoteType": 2, "remoteBusId": "FFFFFFFF:FF:FF.0"}],
//                     "peers": [{"gpu": 1, "commonAncestor": 50,
//                                "p2p": {"read": 0, "write": 0, "nvlink": 0, "atomics": 0}}],
//                     "fabric": {"clusterUuid": "9277d399-0674-44a9-b64e-d85bb19ce2b0", "status": 0,
//                                "cliqueId": 32766, "state": 3, "healthMask": 170}}]},
//  "cuda": {"open": {"message": "libcuda.so.1 not loadable"}} |
//          {"devices": [{"busId": "0000:18:00.0"} | null], "canAccessPeer": [[null, true], [true, null]]},
//  "sysfs": {"bus/pci/devices/0000:18:00.0/numa_node": "0\n", "devices/system/node/node0/cpulist": "0-47\n"}}
//
// A member that is missing or null is an answer NVML did not give (an entry point
// an older driver lacks, a call that failed): the getter answers nothing, as the
// dlopen library does.
#include <nlohmann/json.hpp>

#include "agent/gpu_driver.h"
#include "base/result.h"

namespace podshaper::agent {

// Asks everything the backend may ask: every GPU, every NVLink, every ordered pair and
// P2P capability, the CUDA driver's devices and peer access, and the sysfs files the
// NUMA fallbacks read.
nlohmann::json recordGpus(const GpuSources& sources);

// Sources answering from a recording, and refusing to measure bandwidth (a recording has
// no GPUs to copy between). Error: which member is not what it should be
// ("GPU recording: nvml.gpus[1].peers[0].gpu: expected a GPU index below 2").
Result<GpuSources> replayGpus(const nlohmann::json& recording);

}  // namespace podshaper::agent
