#pragma once

// Scenario builders for the operator's verdict tests:
//   TopologyBuilder(8).link("NV18").p2p("OK").spec(), gpuNode(8), defaultPolicy()

#include <map>
#include <string>

#include <nlohmann/json.hpp>

#include "api/policy.h"
#include "api/report.h"
#include "api/topology.h"
#include "base/timefmt.h"
#include "judging/report_status.h"
#include "judging/verdict.h"

namespace podshaper {

using nlohmann::json;

inline constexpr long long kNow = 1795305600;  // 2026-11-22T00:00:00Z

// A node's report, as scenarios: TopologyBuilder(8).link("NV18").p2p("OK").spec()
class TopologyBuilder {
 public:
  explicit TopologyBuilder(int gpus) {
    for (int i = 0; i < gpus; ++i) {
      GpuInfo g;
      g.index = i;
      g.uuid = "GPU-" + std::to_string(i);
      t_.gpus.push_back(g);
    }
    for (int a = 0; a < gpus; ++a) {
      for (int b = a + 1; b < gpus; ++b) {
        GpuPair p;
        p.a = a;
        p.b = b;
        p.link = "NV18";
        p.nvlinks = 18;
        t_.pairs.push_back(p);
      }
    }
    p2p("OK");
  }
  TopologyBuilder& link(const std::string& l) {
    for (auto& p : t_.pairs) p.link = l;
    return *this;
  }
  TopologyBuilder& p2p(const std::string& s) {
    for (auto& p : t_.pairs) p.p2p.read = p.p2p.write = s;
    return *this;
  }
  TopologyBuilder& pair(int a, int b, const std::string& link, const std::string& p2p) {
    for (auto& p : t_.pairs) {
      if (p.a == a && p.b == b) {
        p.link = link;
        p.p2p.read = p2p;
      }
    }
    return *this;
  }
  TopologyBuilder& bandwidth(double gbps) {
    for (auto& p : t_.pairs) p.bandwidthGBps = gbps;
    return *this;
  }
  TopologyBuilder& memlock(uint64_t bytes) {
    t_.host.memlockBytes = bytes;
    return *this;
  }
  TopologyBuilder& memlockProbe(MemlockLimit requested, bool granted, std::string message = "") {
    t_.host.memlockProbe = MemlockProbe{requested, granted, std::move(message)};
    return *this;
  }
  // Every GPU in clique `clique` of a multi-node NVLink fabric, completed and healthy; then
  // one GPU's changed: .fabric().gpuFabric(1, [](GpuFabric& f) { f.state = "InProgress"; })
  TopologyBuilder& fabric(uint32_t clique = 32766) {
    for (auto& g : t_.gpus) g.fabric = GpuFabric{kFabricCluster, clique, "Completed", "Success", 0xAA};
    return *this;
  }
  template <class Change>
  TopologyBuilder& gpuFabric(int gpu, Change change) {
    change(*t_.gpus[gpu].fabric);
    return *this;
  }
  static constexpr const char* kFabricCluster = "9277d399-0674-44a9-b64e-d85bb19ce2b0";
  json spec(long long observedAt = kNow - 30) const { return reportSpec(t_, formatTime(observedAt)); }

 private:
  Topology t_;
};

// Events as "Warning TopologyNotValidated", in order.
inline std::vector<std::string> eventKinds(const std::vector<EventSpec>& events) {
  std::vector<std::string> out;
  for (const auto& e : events) out.push_back(e.type + " " + e.reason);
  return out;
}

inline Node gpuNode(uint64_t gpus, std::map<std::string, std::string> labels = {}) {
  return Node{.name = "gpu-0", .uid = "uid-0", .labels = SharedLabels(labels), .allocatableGpus = gpus};
}

inline Policy defaultPolicy() {
  Policy p{.name = "default"};
  p.requirements.requireP2PAllPairs = true;
  p.requirements.requireMemlockUnlimited = true;
  p.requirements.maxReportAgeSeconds = 600;
  return p;
}

// The API objects as the operator's caches hold them.
inline json reportObject(const json& spec, const std::string& resourceVersion = "10", json status = nullptr,
                         bool ownedByNode = true) {
  json report = {{"apiVersion", "podshaper.io/v1alpha1"},
                 {"kind", "GPUTopologyReport"},
                 {"metadata", {{"name", "gpu-0"}, {"uid", "report-uid"}, {"resourceVersion", resourceVersion},
                               {"generation", 1}}},
                 {"spec", spec}};
  if (ownedByNode) {
    report["metadata"]["ownerReferences"] = {{{"apiVersion", "v1"}, {"kind", "Node"}, {"name", "gpu-0"}, {"uid", "uid-0"}}};
  }
  if (!status.is_null()) report["status"] = std::move(status);
  return report;
}

inline json nodeObject(uint64_t gpus, const std::string& resourceVersion = "20", json labels = json::object()) {
  labels["kubernetes.io/hostname"] = "gpu-0";
  return {{"metadata", {{"name", "gpu-0"}, {"uid", "uid-0"}, {"resourceVersion", resourceVersion}, {"labels", labels}}},
          {"status", {{"allocatable", {{"nvidia.com/gpu", std::to_string(gpus)}}}}}};
}

}  // namespace podshaper
