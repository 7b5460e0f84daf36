#pragma once

// What the controllers read of the cluster: a cache of one resource collection behind a
// small read interface, an informer's in the operator and a map in the tests; and what
// the informers keep of each object (their transforms).

#include <cstddef>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "kube/informer.h"

namespace podshaper::op {

class Cache {
 public:
  virtual ~Cache() = default;
  // By store key: "namespace/name", or "name" when cluster-scoped.
  virtual std::optional<nlohmann::json> get(const std::string& key) const = 0;
  virtual std::vector<std::string> keys() const = 0;
  virtual std::vector<nlohmann::json> snapshot() const = 0;
  virtual std::size_t size() const = 0;
};

class InformerCache : public Cache {
 public:
  explicit InformerCache(const kube::Informer& informer) : informer_(informer) {}
  std::optional<nlohmann::json> get(const std::string& key) const override { return informer_.get(key); }
  std::vector<std::string> keys() const override { return informer_.keys(); }
  std::vector<nlohmann::json> snapshot() const override { return informer_.snapshot(); }
  std::size_t size() const override { return informer_.size(); }

 private:
  const kube::Informer& informer_;
};

// What the operator keeps of a Node: name, uid, resourceVersion, labels, taints, cordon,
// podshaper's own condition and allocatable; what prune reads too.
void compactNode(nlohmann::json& node);
// A report without managedFields, its spec kept as its text (parsed when judged).
void compactReport(nlohmann::json& report);
// A shaped pod, as judging/pending.h, judging/shm_exhausted.h, judging/shm_profile_plan.h and
// judging/memlock_held.h read it.
void compactPod(nlohmann::json& pod);
// A ShmUsage, as judging/shm_profile_plan.h reads it: whose it is and its ended runs.
void compactShmUsage(nlohmann::json& usage);
// A ShmProfile: its name alone. The watch says which profiles exist (so that one whose pods
// are gone still expires); a look reads the profile itself.
void compactShmProfile(nlohmann::json& profile);

}  // namespace podshaper::op
