#include "webhook/cluster_cache.h"

#include <algorithm>
#include <chrono>

#include "api/names.h"
#include "api/shm_profile.h"
#include "base/json_util.h"
#include "cli/logging.h"
#include "kube/protocol.h"

namespace podshaper::webhook {
namespace {
const cli::Logger& kLog = cli::logger("cluster-cache");

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
  options.packed = true;  // 100,000 claims: each about 200 bytes packed
  return options;
}

kube::InformerOptions keeping(void (*transform)(nlohmann::json&), bool packed = false) {
  kube::InformerOptions options;
  options.transform = transform;
  options.packed = packed;
  return options;
}

constexpr const char* kResourceApi = "resource.k8s.io/v1";

}  // namespace

// What the Namespace and Node caches keep: what admission reads. Of a Namespace, its
// podshaper.io/ and Pod Security labels; of a Node, its name, uid, podshaper.io/ labels
// (placement reads no other), allocatable GPUs and memory capacity. A GPU node's other
// labels (NFD's and GPU feature discovery's, some 80), images, conditions and
// managedFields are nearly all of its bytes, and its kubelet rewrites them every few
// minutes: kept, 12,500 Nodes cost the webhook hundreds of MiB, and every heartbeat
// rebuilt the view (kube::applyWatchEvent: what is kept did not change).
namespace {

nlohmann::json labelsWithPrefixes(const nlohmann::json& object, std::initializer_list<std::string_view> prefixes) {
  nlohmann::json kept = nlohmann::json::object();
  for (const auto& [key, value] : member(member(object, "metadata"), "labels").items()) {
    for (std::string_view prefix : prefixes) {
      if (std::string_view(key).starts_with(prefix)) kept[key] = value;
    }
  }
  return kept;
}

}  // namespace

void keepNamespace(nlohmann::json& ns) {
  if (!ns.is_object()) return;
  nlohmann::json kept = {{"metadata", nlohmann::json::object()}};
  const nlohmann::json& m = member(ns, "metadata");
  for (const char* k : {"name", "resourceVersion"}) {
    if (m.contains(k)) kept["metadata"][k] = m[k];
  }
  kept["metadata"]["labels"] = labelsWithPrefixes(ns, {names::kKeyPrefix, "pod-security.kubernetes.io/"});
  ns = std::move(kept);
}

void keepNode(nlohmann::json& node) {
  if (!node.is_object()) return;
  nlohmann::json kept = {{"metadata", nlohmann::json::object()}};
  const nlohmann::json& m = member(node, "metadata");
  for (const char* k : {"name", "uid", "resourceVersion"}) {
    if (m.contains(k)) kept["metadata"][k] = m[k];
  }
  kept["metadata"]["labels"] = labelsWithPrefixes(node, {names::kKeyPrefix});
  const nlohmann::json& status = member(node, "status");
  if (const nlohmann::json& gpus = member(member(status, "allocatable"), names::kGpuResource); !gpus.is_null()) {
    kept["status"]["allocatable"][names::kGpuResource] = gpus;
  }
  if (const nlohmann::json& memory = member(member(status, "capacity"), "memory"); !memory.is_null()) {
    kept["status"]["capacity"]["memory"] = memory;
  }
  node = std::move(kept);
}


ClusterCache::ClusterCache(const kube::Client& client, metrics::Registry* metrics)
    : missClient_(client.config(), missOptions(client.options())),
      namespaces_(client, "/api/v1/namespaces", keeping(keepNamespace)),
      // Packed: what is kept of 12,500 Nodes was 20 MiB of heap as JSON trees; the view is
      // rebuilt from placedNodes_, which reads again only the Nodes that changed.
      nodes_(client, "/api/v1/nodes", keeping(keepNode, /*packed=*/true)),
      claimTemplates_(client, kube::resourcePath(kResourceApi, "resourceclaimtemplates"), keepClaimSpec(true)),
      resourceClaims_(client, kube::resourcePath(kResourceApi, "resourceclaims"), keepClaimSpec(false)),
      // 10,000 profiles of 10 runs: docs/BENCHMARKS.md.
      shmProfiles_(client, kube::resourcePath(names::kGroupVersion, names::kShmProfileResource),
                   keeping(keepShmProfile, /*packed=*/true)) {
  auto markDirty = [this] {
    std::lock_guard lock(mu_);
    dirty_ = true;
    changed_.notify_one();
  };
  // Each watch's count, kept current on every change it brings.
  auto counting = [metrics](kube::Informer& informer, const char* resource, bool rebuild,
                            const std::function<void()>& dirty) {
    metrics::Gauge* gauge = metrics == nullptr ? nullptr
                                               : &metrics->gauge("podshaper_webhook_cached_objects",
                                                                 "Objects the webhook's watches hold, by resource.",
                                                                 {{"resource", resource}});
    informer.onChange([&informer, gauge, rebuild, dirty] {
      if (gauge != nullptr) gauge->set(static_cast<double>(informer.size()));
      if (rebuild) dirty();
    });
  };
  nodes_.onKeys([this](const std::vector<std::string>& keys) {  // before its onChange marks the view dirty
    std::lock_guard lock(mu_);
    changedNodes_.insert(keys.begin(), keys.end());
  });
  counting(namespaces_, "namespaces", true, markDirty);
  counting(nodes_, "nodes", true, markDirty);
  counting(claimTemplates_, "resourceclaimtemplates", false, markDirty);
  counting(resourceClaims_, "resourceclaims", false, markDirty);
  counting(shmProfiles_, "shmprofiles", false, markDirty);
}

ClusterCache::~ClusterCache() { stop(); }

void ClusterCache::start() {
  rebuilder_ = std::thread([this] { rebuildLoop(); });
  namespaces_.start();
  nodes_.start();
  claimTemplates_.start();
  resourceClaims_.start();
  shmProfiles_.start();
}

void ClusterCache::stop() {
  namespaces_.stop();
  nodes_.stop();
  claimTemplates_.stop();
  resourceClaims_.stop();
  shmProfiles_.stop();
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

ShmProfileLookup ClusterCache::shmProfiles() const {
  return [this](std::string_view ns, std::string_view name) {
    std::string key;
    key.reserve(ns.size() + 1 + name.size());
    key.append(ns).append("/").append(name);
    return shmProfiles_.get(key);
  };
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
    kLog.info("{} {}/{} read from the API server (its watch event had not come yet)", kindName(ref.kind), ns,
              ref.name);
    nlohmann::json object = *got;
    object["kind"] = std::string(kindName(ref.kind));
    return std::optional(claimSpecOf(object));
  }
  // The object is missing (a Status NotFound); a 404 without one means the API server
  // does not serve resource.k8s.io/v1.
  if (got.error().code == 404 && got.error().reason == "NotFound") return std::optional<nlohmann::json>();
  kLog.warn("GET {}: {}", path, got.error().message);
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
      std::set<std::string> changed;
      {
        std::lock_guard lock(mu_);
        changed.swap(changedNodes_);
      }
      for (const std::string& name : changed) {
        auto object = nodes_.get(name);
        auto node = object ? placedNode(*object, labelStrings_) : std::nullopt;
        if (node) {
          placedNodes_[name] = std::move(*node);
        } else {
          placedNodes_.erase(name);
        }
      }
      std::vector<Node> nodes;
      nodes.reserve(placedNodes_.size());
      for (const auto& [name, node] : placedNodes_) nodes.push_back(node);
      auto view = std::make_shared<const ClusterView>(
          clusterViewOf(namespaceLabelsOf(namespaces_.snapshot()), std::move(nodes)));
      bool first;
      {
        std::lock_guard lock(mu_);
        first = view_ == nullptr;
        view_ = view;
      }
      if (first) {
        kLog.info("synced: {} namespaces, {} GPU nodes, podshaper labels {}", view->namespaceLabels.size(),
                  view->nodes.size(), view->hasPodshaperLabels() ? "present" : "absent");
      }
    }
    std::this_thread::sleep_for(kCoalesce);
  }
}

}  // namespace podshaper::webhook
