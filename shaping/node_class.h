#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "shaping/cluster_view.h"
#include "shaping/config.h"

namespace podshaper {

// The kind of node a training pod will land on: how many GPUs it has (G), how
// much memory, and whether podshaper's operator validated P2P between all its GPUs.
struct NodeClass {
  uint64_t gpus = 0;
  std::optional<int64_t> memoryBytes;
  bool p2pAllPairs = false;
  // Write node affinity to podshaper's node labels? False while no node carries
  // them yet (operator not installed), so pods stay schedulable.
  bool placeByLabels = true;
  std::string source;  // where G came from, in words
  // When the pod asks more GPUs than G: what the cluster's GPU nodes have, in words
  // ("the cluster's GPU nodes have 4 GPUs (3 nodes) or 2 (1 node)"); empty without a cluster.
  std::string sizes;
  // The most GPUs any node of the cluster has, validated or not; unset without a cluster
  // view or GPU nodes. A pod asking more can run nowhere.
  std::optional<uint64_t> largestNode;
  // The multi-node NVLink domains of the nodes that could take the pod (their
  // podshaper.io/nvlink-domain: domain -> nodes), and how many of them have none. The
  // counts are the cluster view's kind's where one kind holds those nodes (no copy of
  // 700 domains each admission), else their sum.
  std::shared_ptr<const std::map<std::string, std::size_t>> nvlinkDomainCounts;
  std::size_t withoutNvlinkDomain = 0;
  const std::map<std::string, std::size_t>& nvlinkDomains() const;
  // Every node that could take the pod is in an NVLink domain (docs/webhook.md "Multi-node NVLink").
  bool mnnvl() const { return !nvlinkDomains().empty() && withoutNvlinkDomain == 0; }
  std::vector<std::string> warnings;
};

// podGpus: the pod's GPUs; nullopt when it asks every GPU of its node (a DRA request
// of allocationMode All): G is then the largest class unless the pod names one. requestedGpus: the pod's own nodeSelector
// podshaper.io/gpu-count, if any. nodeExclusive: the pod owns a whole node of
// G GPUs; a shared pod may land on any node with at least podGpus GPUs, so
// memory and P2P are judged over all of those. cluster: null when deciding
// from config only. A node-exclusive pod asking a size that nodes of the cluster have,
// none of them validated and granting the memlock now (reports gone stale, a node being
// repaired), is shaped for that size and waits Pending, told why (docs/webhook.md
// "A pod that could wait is not refused").
NodeClass resolveNodeClass(std::optional<uint64_t> podGpus, std::optional<uint64_t> requestedGpus, bool nodeExclusive,
                           const NodeSettings& settings, const ClusterView* cluster);

}  // namespace podshaper
