#include "webhook/cluster_cache.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <chrono>

#include "base/json_util.h"
#include "kube/protocol.h"

namespace podshaper::webhook {
namespace {

// Node heartbeats change Nodes every few seconds each; rebuild the view at
// most this often however many events arrive.
constexpr auto kCoalesce = std::chrono::milliseconds(200);

// GETs on a watch miss: the API server waits for the whole admission (the
// webhook's timeoutSeconds, 5 in the manifests), so each is short and one
// admission spends at most kMissBudget starting them.
constexpr auto kMissTimeout = std::chrono::seconds(1);
constexpr auto kMissBudget = std::chrono::seconds(2);

kube::ClientOptions missOptions(kube::ClientOptions options) {
  options.requestTimeout = std::min<std::chrono::milliseconds>(options.requestTimeout, kMissTimeout);
  options.maxRetries = 0;
  return options;
}

// What the claim caches keep: the name and the device requests. A claim's
// status (its allocation, one entry per device) is never read.
kube::InformerOptions keepClaimSpec(bool isTemplate) {
  kube::InformerOptions options;
  options.transform = [isTemplate](nlohmann::json& object) {
    if (!object.is_object()) return;
    nlohmann::json kept = {{"kind", isTemplate ? "ResourceClaimTemplate" : "ResourceClaim"},
                           {"metadata", nlohmann::json::object()}};
    const nlohmann::json& m = member(object, "metadata");
    for (const char* k : {"name", "namespace", "uid", "resourceVersion"}) {
      if (m.contains(k)) kept["metadata"][k] = m[k];
    }
    const nlohmann::json& spec = isTemplate ? member(member(object, "spec"), "spec") : member(object, "spec");
    // Only the requests are read: not the driver's config, nor the constraints.
    if (const nlohmann::json& requests = member(member(spec, "devices"), "requests"); !requests.is_null()) {
      if (isTemplate) kept["spec"]["spec"]["devices"]["requests"] = requests;
      else kept["spec"]["devices"]["requests"] = requests;
    }
    object = std::move(kept);
  };
  return options;
}

constexpr const char* kResourceApi = "resource.k8s.io/v1";

}  // namespace

ClusterCache::ClusterCache(const kube::Client& client)
    : missClient_(client.config(), missOptions(client.options())),
      namespaces_(client, "/api/v1/namespaces"),
      nodes_(client, "/api/v1/nodes"),
      claimTemplates_(client, kube::resourcePath(kResourceApi, "resourceclaimtemplates"), keepClaimSpec(true)),
      resourceClaims_(client, kube::resourcePath(kResourceApi, "resourceclaims"), keepClaimSpec(false)) {
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
  claimTemplates_.start();
  resourceClaims_.start();
}

void ClusterCache::stop() {
  namespaces_.stop();
  nodes_.stop();
  claimTemplates_.stop();
  resourceClaims_.stop();
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

ClaimLookup ClusterCache::claims() const {
  // One per admission: its GETs share the budget.
  const auto deadline = std::chrono::steady_clock::now() + kMissBudget;
  return [this, deadline](std::string_view ns, const ClaimRef& ref) { return claimSpec(ns, ref, deadline); };
}

Result<std::optional<nlohmann::json>> ClusterCache::claimSpec(std::string_view ns, const ClaimRef& ref,
                                                             std::chrono::steady_clock::time_point deadline) const {
  const bool isTemplate = ref.kind == ClaimKind::kTemplate;
  const kube::Informer& watched = isTemplate ? claimTemplates_ : resourceClaims_;
  if (auto object = watched.get(std::string(ns) + "/" + ref.name)) return std::optional(claimSpecOf(*object));
  const std::string path =
      kube::resourcePath(kResourceApi, isTemplate ? "resourceclaimtemplates" : "resourceclaims", ns, ref.name);
  if (std::chrono::steady_clock::now() >= deadline) {
    return makeError("not in the webhook's watch yet, and its time to read claims from the API server is spent");
  }
  auto got = missClient_.get(path);
  if (got) {
    spdlog::info("cluster cache: {} {}/{} read from the API server (its watch event had not come yet)",
                 kindName(ref.kind), ns, ref.name);
    nlohmann::json object = *got;
    object["kind"] = std::string(kindName(ref.kind));
    return std::optional(claimSpecOf(object));
  }
  // The object is missing (a Status NotFound); a 404 without one means the API server
  // does not serve resource.k8s.io/v1.
  if (got.error().code == 404 && got.error().reason == "NotFound") return std::optional<nlohmann::json>();
  spdlog::warn("cluster cache: GET {}: {}", path, got.error().message);
  return makeError("GET " + path + ": " + got.error().message);
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
