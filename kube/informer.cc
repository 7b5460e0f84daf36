#include "kube/informer.h"

#include <random>

#include "cli/logging.h"
#include "kube/backoff.h"
#include "metrics/heap.h"

namespace podshaper::kube {

namespace {
const cli::Logger& kLog = cli::logger("informer");
}  // namespace

Informer::Informer(const Client& client, std::string path, InformerOptions options)
    : client_(client), path_(std::move(path)), options_(std::move(options)) {}

Informer::~Informer() {
  stop();
  // Destroyed from its own callback: the thread cannot join itself.
  if (thread_.joinable()) thread_.detach();
}

void Informer::onChange(std::function<void()> callback) { onChange_ = std::move(callback); }

void Informer::onKeys(std::function<void(const std::vector<std::string>&)> callback) {
  onKeys_ = std::move(callback);
}

void Informer::start() {
  if (thread_.joinable()) return;
  stop_ = false;
  thread_ = std::thread([this] { run(); });
}

void Informer::stop() {
  {
    std::lock_guard lock(sleepMu_);
    stop_ = true;
  }
  sleepCv_.notify_all();
  if (thread_.joinable() && thread_.get_id() != std::this_thread::get_id()) thread_.join();
}

void Informer::storedForm(nlohmann::json& object) const {
  if (options_.transform) options_.transform(object);
  if (options_.packed) object = packObject(object);
}

nlohmann::json Informer::unpacked(const nlohmann::json& stored) const {
  if (!options_.packed) return stored;
  auto object = unpackObject(stored);
  if (object) return std::move(*object);
  // Only memory going bad could do this: what the store keeps is packed here.
  kLog.error({{"informer", path_}}, "{}", object.error().message);
  return stored;
}

std::vector<nlohmann::json> Informer::snapshot() const {
  std::vector<nlohmann::json> out;
  {
    std::lock_guard lock(mu_);
    out.reserve(store_.size());
    for (const auto& [key, object] : store_) out.push_back(object);
  }
  // Unpacked outside the lock: events wait on it.
  if (options_.packed) {
    for (auto& object : out) object = unpacked(object);
  }
  return out;
}

std::vector<std::string> Informer::keys() const {
  std::lock_guard lock(mu_);
  std::vector<std::string> out;
  out.reserve(store_.size());
  for (const auto& [key, object] : store_) out.push_back(key);
  return out;
}

std::size_t Informer::size() const {
  std::lock_guard lock(mu_);
  return store_.size();
}

std::optional<nlohmann::json> Informer::get(const std::string& key) const {
  std::optional<nlohmann::json> stored;
  {
    std::lock_guard lock(mu_);
    auto it = store_.find(key);
    if (it == store_.end()) return std::nullopt;
    stored = it->second;
  }
  if (!options_.packed) return stored;
  return unpacked(*stored);
}

std::string Informer::resourceVersion() const {
  std::lock_guard lock(mu_);
  return resourceVersion_;
}

bool Informer::sleepUnlessStopped(std::chrono::milliseconds delay) {
  std::unique_lock lock(sleepMu_);
  return !sleepCv_.wait_for(lock, delay, [this] { return stop_.load(); });
}

void Informer::notifyChange(const std::vector<std::string>& keys) {
  notifyKeys(keys);
  notifyChanged();
}

void Informer::notifyKeys(const std::vector<std::string>& keys) {
  try {
    if (onKeys_) onKeys_(keys);
  } catch (const std::exception& e) {
    kLog.error({{"informer", path_}}, "onKeys threw: {}", e.what());
  }
}

void Informer::notifyChanged() {
  try {
    if (onChange_) onChange_();
  } catch (const std::exception& e) {
    kLog.error({{"informer", path_}}, "onChange threw: {}", e.what());
  }
}

void Informer::handleEvent(const WatchEvent& original) {
  WatchEvent transformed;
  const bool transform =
      (options_.transform || options_.packed) && (original.type == "ADDED" || original.type == "MODIFIED");
  if (transform) {
    transformed = original;
    storedForm(transformed.object);
  }
  const WatchEvent& event = transform ? transformed : original;
  Result<bool> changed = false;
  {
    std::lock_guard lock(mu_);
    if (std::string rv = resourceVersionOf(original.object); !rv.empty()) resourceVersion_ = std::move(rv);
    changed = applyWatchEvent(store_, event);
  }
  if (!changed) {
    kLog.warn({{"informer", path_}}, "ignored a watch event: {}", changed.error().message);
  } else if (*changed) {
    auto key = objectKey(event.object);
    notifyChange(key ? std::vector<std::string>{*key} : std::vector<std::string>{});
  }
}

void Informer::run() {
  Backoff backoff(options_.initialBackoff, options_.maxBackoff);
  std::mt19937 rng(std::random_device{}());
  bool needList = true;

  while (!stop_.load()) {
    if (needList) {
      std::function<void(nlohmann::json&)> stored;
      if (options_.transform || options_.packed) stored = [this](nlohmann::json& object) { storedForm(object); };
      auto list = client_.list(path_, options_.labelSelector, options_.fieldSelector, &stop_, stored);
      if (stop_.load()) return;
      if (!list) {
        const auto delay = backoff.next();
        kLog.warn({{"informer", path_}}, "list failed: {}; retrying in {} ms", list.error().message, delay.count());
        sleepUnlessStopped(delay);
        continue;
      }
      const std::string rv = resourceVersionOf(*list);
      ObjectStore fresh = storeFromList(std::move(*list));
      const std::size_t count = fresh.size();
      std::vector<std::string> keys;
      bool changed;
      {
        std::lock_guard lock(mu_);
        keys = changedKeys(store_, fresh);
        changed = !synced_.load() || !keys.empty();
        store_ = std::move(fresh);
        resourceVersion_ = rv;
      }
      // A list of thousands of objects passed through the heap, page by page; the
      // allocator keeps those pages unless asked to give them back.
      list = kube::ApiResult<nlohmann::json>(nlohmann::json());
      metrics::giveFreedMemoryBack();
      // The keys that changed reach onKeys before the list counts as synced: whoever sees
      // hasSynced() (a cache building its view on another thread) finds them there already.
      if (changed) notifyKeys(keys);
      const bool first = !synced_.exchange(true);
      kLog.info({{"informer", path_}}, "{} {} objects at resourceVersion {}", first ? "synced" : "relisted", count, rv);
      if (changed) notifyChanged();
      needList = false;
      backoff.reset();
    }

    WatchOptions watchOptions;
    watchOptions.labelSelector = options_.labelSelector;
    watchOptions.fieldSelector = options_.fieldSelector;
    watchOptions.timeoutSeconds = options_.watchTimeoutSeconds;
    if (watchOptions.timeoutSeconds > 0) {
      watchOptions.timeoutSeconds +=
          std::uniform_int_distribution<int>(0, watchOptions.timeoutSeconds / 5)(rng);
    }

    const auto started = std::chrono::steady_clock::now();
    const WatchStatus status = client_.watch(
        path_, resourceVersion(),
        [this](const WatchEvent& event) {
          handleEvent(event);
          return true;
        },
        stop_, watchOptions);

    switch (status.end) {
      case WatchEnd::Stopped:
        return;
      case WatchEnd::Gone:
        kLog.info({{"informer", path_}}, "resourceVersion {} expired ({}); relisting", status.resourceVersion,
                  status.error.message);
        needList = true;
        break;
      case WatchEnd::Closed:
        // A server that ends every watch at once would otherwise make us spin.
        if (status.events == 0 && std::chrono::steady_clock::now() - started < std::chrono::seconds(1)) {
          sleepUnlessStopped(backoff.next());
        } else {
          backoff.reset();
        }
        break;
      case WatchEnd::Error: {
        const auto delay = backoff.next();
        kLog.warn({{"informer", path_}}, "watch failed: {}; retrying in {} ms", status.error.message, delay.count());
        // A stream we could not decode may have lost an event: start over from a list.
        if (status.error.code == 200) needList = true;
        sleepUnlessStopped(delay);
        break;
      }
    }
  }
}

}  // namespace podshaper::kube
