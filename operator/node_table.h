#pragma once

// What the operator knows of each GPU node (judging/node_facts.h), kept from the Node and
// report watches: a name whose Node or report changed is read again at the next snapshot,
// nothing else. The TopologyPolicies' status and the pending pods' explanations read it;
// reading every Node and every report for each of them cost most of a core at 12,500
// nodes (docs/BENCHMARKS.md).

#include <cstddef>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "base/string_pool.h"
#include "judging/node_facts.h"

namespace podshaper::op {

class NodeTable {
 public:
  // The Node, or the report, of that name as the cache holds it; nullopt when there is none.
  using Read = std::function<std::optional<nlohmann::json>(const std::string& name)>;
  NodeTable(Read node, Read report) : readNode_(std::move(node)), readReport_(std::move(report)) {}

  // Names whose Node or report changed or went. Cheap; from any thread (the informers').
  void changed(const std::vector<std::string>& names);
  // Every Node's facts, sorted by name (without the pods bound to them). The same vector while nothing
  // changed; a snapshot keeps what it held when it was taken.
  std::shared_ptr<const std::vector<NodeFacts>> snapshot();
  // Nodes and reports read so far (for tests: only what changed is read).
  std::size_t reads() const;

 private:
  const Read readNode_, readReport_;
  mutable std::mutex dirtyMu_;  // guards dirty_ only: changed() never waits on the reads
  std::set<std::string> dirty_;
  mutable std::mutex mu_;  // guards facts_, strings_ and reads_
  std::shared_ptr<std::vector<NodeFacts>> facts_ = std::make_shared<std::vector<NodeFacts>>();
  StringPool strings_;  // the labels' keys and values, shared between nodes
  std::size_t reads_ = 0;
};

}  // namespace podshaper::op
