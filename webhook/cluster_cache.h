#pragma once

#include <condition_variable>
#include <memory>
#include <mutex>
#include <thread>

#include "kube/client.h"
#include "kube/informer.h"
#include "shaping/cluster_view.h"

namespace podshaper::webhook {

// Namespaces (Pod Security labels) and Nodes (podshaper's labels, GPUs,
// memory) kept current by watches. Admission reads the latest snapshot and
// never waits on the API server.
class ClusterCache {
 public:
  explicit ClusterCache(const kube::Client& client);
  ~ClusterCache();
  ClusterCache(const ClusterCache&) = delete;
  ClusterCache& operator=(const ClusterCache&) = delete;

  void start();
  void stop();
  // True once the first view is built from both watches.
  bool synced() const { return view() != nullptr; }
  // Null until both watches have synced: decide from annotations and config meanwhile.
  std::shared_ptr<const ClusterView> view() const;

 private:
  void rebuildLoop();

  kube::Informer namespaces_;
  kube::Informer nodes_;
  mutable std::mutex mu_;
  std::condition_variable changed_;
  bool dirty_ = false;
  bool stopping_ = false;
  std::shared_ptr<const ClusterView> view_;
  std::thread rebuilder_;
};

}  // namespace podshaper::webhook
