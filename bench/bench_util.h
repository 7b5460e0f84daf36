#pragma once

// What the in-process benchmarks share: the calling thread's CPU time, an input file, and
// the GPU nodes an admission is placed on.
#include <time.h>

#include <cstdint>
#include <fstream>
#include <sstream>
#include <string>
#include <utility>

#include "api/names.h"
#include "shaping/cluster_view.h"

namespace podshaper::bench {

inline double threadCpuSeconds() {
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) / 1e9;
}

inline std::string readFile(const std::string& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

// A node the operator validated: `gpus` GPUs with P2P between all, unlimited memlock.
inline Node validatedNode(std::string name, uint64_t gpus, int64_t memoryBytes) {
  Node n;
  n.name = std::move(name);
  n.allocatableGpus = gpus;
  n.memoryBytes = memoryBytes;
  n.labels = {{std::string(names::kTopologyValidated), "true"},
              {std::string(names::kGpuCount), std::to_string(gpus)},
              {std::string(names::kP2P), std::string(names::kP2PAll)},
              {std::string(names::kMemlock), std::string(names::kMemlockUnlimited)}};
  return n;
}

// Four validated nodes of 8 H100s, and the namespace of the bench's pods ("ml").
inline ClusterView gpuCluster() {
  ClusterView view;
  for (int i = 0; i < 4; ++i) view.nodes.push_back(validatedNode("h100-" + std::to_string(i), 8, 2LL << 40));
  view.namespaceLabels = {{"ml", {}}};
  return view;
}

}  // namespace podshaper::bench
