#include "webhook/cluster_cache.h"

#include <spdlog/spdlog.h>

#include <chrono>

namespace podshaper::webhook {
namespace {

// Node heartbeats change Nodes every few seconds each; rebuild the view at
// most this often however many events arrive.
constexpr auto kCoalesce = std::chrono::milliseconds(200);

}  // namespace

ClusterCache::ClusterCache(const kube::Client& client)
    : namespaces_(client, "/api/v1/namespaces"), nodes_(client, "/api/v1/nodes") {
  auto markDirty = [this] {
    std::lock_guard lock(mu_);
    dirty_ = true;
    changed_.notify_one();
  };
  namespaces_.onChange(markDirty);
  nodes_.onChange(markDirty);
}

ClusterCache::~ClusterCache() { stop(); }

void ClusterCache::start() {
  rebuilder_ = std::thread([this] { rebuildLoop(); });
  namespaces_.start();
  nodes_.start();
}

void ClusterCache::stop() {
  namespaces_.stop();
  nodes_.stop();
  {
    std::lock_guard lock(mu_);
    stopping_ = true;
    changed_.notify_one();
  }
  if (rebuilder_.joinable()) rebuilder_.join();
}

std::shared_ptr<const ClusterView> ClusterCache::view() const {
  std::lock_guard lock(mu_);
  return view_;
}

void ClusterCache::rebuildLoop() {
  while (true) {
    {
      std::unique_lock lock(mu_);
      changed_.wait(lock, [this] { return dirty_ || stopping_; });
      if (stopping_) return;
      dirty_ = false;
    }
    if (namespaces_.hasSynced() && nodes_.hasSynced()) {
      auto view = std::make_shared<const ClusterView>(buildClusterView(namespaces_.snapshot(), nodes_.snapshot()));
      bool first;
      {
        std::lock_guard lock(mu_);
        first = view_ == nullptr;
        view_ = view;
      }
      if (first) {
        spdlog::info("cluster cache: synced: {} namespaces, {} GPU nodes, podshaper labels {}",
                     view->namespaceLabels.size(), view->nodes.size(),
                     view->hasPodshaperLabels() ? "present" : "absent");
      }
    }
    std::this_thread::sleep_for(kCoalesce);
  }
}

}  // namespace podshaper::webhook
