#pragma once

// A local, always-current copy of one resource collection (list, then watch
// from the list's resourceVersion; bookmarks keep the resourceVersion fresh; a
// 410 relists; errors back off). Readers take snapshots; a callback says when
// something changed, which is all a level-based reconciler needs.

#include <nlohmann/json.hpp>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <functional>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "kube/client.h"
#include "kube/store.h"

namespace podshaper::kube {

struct InformerOptions {
  std::string labelSelector;
  std::string fieldSelector;
  // Each watch asks the server to end after this many seconds (plus up to 20%
  // jitter, so that many informers do not reconnect together).
  int watchTimeoutSeconds = 300;
  std::chrono::milliseconds initialBackoff = std::chrono::milliseconds(500);
  std::chrono::milliseconds maxBackoff = std::chrono::seconds(30);
  // Applied to every object before it is stored (client-go's SetTransform): keep
  // only what the reader needs, as caches of thousands of objects otherwise hold
  // every managedFields entry and status image list.
  std::function<void(nlohmann::json&)> transform;
  // Each object kept packed after its transform (kube::packObject: about a tenth of the
  // memory), unpacked by get() and snapshot(): for caches of thousands of objects read
  // one at a time.
  bool packed = false;
};

class Informer {
 public:
  // `path` is a collection, e.g. "/api/v1/nodes" or
  // "/apis/podshaper.io/v1alpha1/gputopologyreports". The client must outlive
  // the informer.
  Informer(const Client& client, std::string path, InformerOptions options = {});
  ~Informer();  // stops
  Informer(const Informer&) = delete;
  Informer& operator=(const Informer&) = delete;

  // Called on the informer's thread after the initial sync and after each
  // change, once the store holds it. Set before start(). Keep it short (queue
  // work elsewhere): events wait while it runs.
  void onChange(std::function<void()> callback);
  // Like onChange, with the store keys that changed (added, modified or
  // deleted; after a relist, every key that differs from before).
  void onKeys(std::function<void(const std::vector<std::string>&)> callback);

  void start();
  // Returns within about a second, even while a watch is blocked; the callback
  // is not running when it returns. (Called from the callback, it only asks.)
  void stop();

  bool hasSynced() const { return synced_.load(); }
  std::vector<nlohmann::json> snapshot() const;
  // The store's keys, without copying the objects.
  std::vector<std::string> keys() const;
  std::size_t size() const;
  // By store key: "namespace/name", or "name" when cluster-scoped.
  std::optional<nlohmann::json> get(const std::string& key) const;
  std::string resourceVersion() const;
  const std::string& path() const { return path_; }

 private:
  void run();
  // What the store keeps of an object: its transform, packed if asked.
  void storedForm(nlohmann::json& object) const;
  nlohmann::json unpacked(const nlohmann::json& stored) const;
  void handleEvent(const WatchEvent& event);
  // onKeys, then onChange; each alone, where they must be apart (a list: the keys before
  // hasSynced(), the change after).
  void notifyChange(const std::vector<std::string>& keys);
  void notifyKeys(const std::vector<std::string>& keys);
  void notifyChanged();
  bool sleepUnlessStopped(std::chrono::milliseconds delay);

  const Client& client_;
  const std::string path_;
  const InformerOptions options_;
  std::function<void()> onChange_;
  std::function<void(const std::vector<std::string>&)> onKeys_;

  mutable std::mutex mu_;  // guards store_ and resourceVersion_
  ObjectStore store_;
  std::string resourceVersion_;

  std::atomic<bool> synced_{false};
  std::atomic<bool> stop_{false};
  std::mutex sleepMu_;
  std::condition_variable sleepCv_;
  std::thread thread_;
};

}  // namespace podshaper::kube
