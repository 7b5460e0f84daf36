#pragma once

#include <memory>
#include <string>

#include "agent/gpu_driver.h"
#include "api/topology.h"
#include "base/result.h"
#include "cli/flags.h"

namespace podshaper::agent {

// Where a node's GPU topology comes from: NVML and CUDA on a GPU node, a
// captured `nvidia-smi topo -m` output in tests. A node without a driver or
// GPUs gives an empty, valid topology, not an error.
class Backend {
 public:
  virtual ~Backend() = default;
  virtual Result<Topology> probe() = 0;
};

// path: a captured `nvidia-smi topo -m` output (optionally followed by a `topo -p2p r`
// one); p2pPath, unless empty: a `nvidia-smi topo -p2p r` output of the same node, whose
// matrix must have as many GPUs. Without a P2P matrix every pair's P2P status is U.
std::unique_ptr<Backend> makeFixtureBackend(std::string path, std::string p2pPath = {});
// NVML and the CUDA driver: the node's own (nodeGpuSources(): libnvidia-ml.so.1 and
// libcuda.so.1, loaded with dlopen, and /sys) or a recording's (agent/gpu_recording.h).
// measureBandwidth: copy between every pair, unless a compute process holds a GPU.
std::unique_ptr<Backend> makeNvmlBackend(GpuSources sources, bool measureBandwidth = false);

// The backend the command line names: --fixture FILE [--p2p-fixture FILE], --recording FILE
// (`podshaper-agent record`'s output, replayed), else the node's NVML and CUDA. Errors name
// the flag: a P2P fixture without its topo -m one, both a fixture and a recording, a
// recording that cannot be read.
Result<std::unique_ptr<Backend>> backendFromFlags(const cli::Flags& flags, bool measureBandwidth = false);

}  // namespace podshaper::agent
