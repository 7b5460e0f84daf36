#pragma once

// A Kubernetes API client. Paths are API paths ("/api/v1/nodes",
// "/apis/podshaper.io/v1alpha1/gputopologyreports/n1"; see resourcePath());
// bodies are nlohmann::json. Thread-safe: one Client serves every thread.
// cpprestsdk stays inside client.cc.

#include <nlohmann/json.hpp>

#include <atomic>
#include <chrono>
#include <cstddef>
#include <functional>
#include <memory>
#include <string>

#include "kube/api_result.h"
#include "kube/config.h"
#include "kube/protocol.h"

namespace podshaper::metrics {
class Registry;
}

namespace podshaper::kube {

// A list's first page, before its items' size is known (ClientOptions::listPageBytes).
inline constexpr int kFirstListPage = 50;

struct ClientOptions {
  std::chrono::milliseconds requestTimeout = std::chrono::seconds(30);  // per request, not for watches
  int maxRetries = 3;  // resends after 429 (and after a 5xx with Retry-After, for GET)
  std::chrono::milliseconds maxRetryDelay = std::chrono::seconds(30);
  int listPageSize = 500;  // items a list page holds at most
  // About this much JSON text a list page, after its first of kFirstListPage items
  // (kube::nextListLimit): a page's text is held while its items are read (500 GPU Nodes
  // are 8.5 MB of it). 0: every page listPageSize.
  std::size_t listPageBytes = std::size_t{1} << 20;
  std::string fieldManager = "podshaper";  // managedFields owner of our writes
  std::string userAgent = "podshaper";
  // Where set: podshaper_kube_client_requests_total{verb, code} and
  // podshaper_kube_client_request_duration_seconds{verb} (verb: GET, POST, PUT, PATCH,
  // DELETE, WATCH; code 0: no response). Must outlive the client.
  metrics::Registry* metrics = nullptr;
};

enum class WatchEnd {
  Closed,   // the server ended the stream (timeoutSeconds): watch again from resourceVersion
  Gone,     // 410: resourceVersion too old (HTTP 410 or an ERROR event with Status code 410): relist
  Error,    // anything else: back off, then watch again or relist
  Stopped,  // `stop` was set or the handler returned false
};

struct WatchStatus {
  WatchEnd end = WatchEnd::Error;
  ApiError error;               // why, for Gone and Error
  std::string resourceVersion;  // the last one seen (events and bookmarks), else the one asked for
  std::size_t events = 0;       // events handed to the handler, bookmarks included
};

const char* toString(WatchEnd end);

// Returns false to end the watch.
using WatchHandler = std::function<bool(const WatchEvent&)>;

class Client {
 public:
  explicit Client(ClientConfig config, ClientOptions options = {});
  ~Client();
  Client(const Client&) = delete;
  Client& operator=(const Client&) = delete;

  ApiResult<nlohmann::json> get(const std::string& path) const;

  // GET of a resource that answers in text, not JSON (a pod's log), as it came.
  ApiResult<std::string> getText(const std::string& path) const;

  // Every page (limit=N, then continue=...; N from listPageSize and listPageBytes), as one List object: the
  // first page's kind, apiVersion and metadata.resourceVersion, all items. If a
  // continue token expires midway (410), lists again in one unpaged request.
  // A set `stop` abandons the list within ~100 ms (an ApiError with code 0).
  // Each page is read item by item (readListPage): no page's tree is ever built, and
  // `transform`, if set, is applied to each item as it is read.
  ApiResult<nlohmann::json> list(const std::string& path, const std::string& labelSelector = "",
                                 const std::string& fieldSelector = "",
                                 const std::atomic<bool>* stop = nullptr,
                                 const std::function<void(nlohmann::json&)>& transform = {}) const;

  ApiResult<nlohmann::json> create(const std::string& path, const nlohmann::json& body) const;

  // PatchType::Apply is server-side apply as options.fieldManager; `force` takes
  // over fields other managers own (apply only).
  ApiResult<nlohmann::json> patch(const std::string& path, const nlohmann::json& body, PatchType type,
                                  bool force = false) const;

  // PUT. When body.metadata.resourceVersion is set the server applies it as a
  // precondition: 409 Conflict when the object changed since it was read.
  ApiResult<nlohmann::json> replace(const std::string& path, const nlohmann::json& body) const;

  // DELETE, with optional DeleteOptions (e.g. {"propagationPolicy":"Background"}).
  ApiResult<nlohmann::json> remove(const std::string& path, const nlohmann::json& deleteOptions = nullptr) const;

  // The /status subresource of the object at `path`.
  ApiResult<nlohmann::json> patchStatus(const std::string& path, const nlohmann::json& body, PatchType type,
                                        bool force = false) const;
  ApiResult<nlohmann::json> replaceStatus(const std::string& path, const nlohmann::json& body) const;

  // Streams events of the collection at `path` from resourceVersion as they
  // arrive, until the server closes the stream, a 410, an error, or `stop`
  // (noticed within about 100 ms, even while no data flows).
  WatchStatus watch(const std::string& path, const std::string& resourceVersion, const WatchHandler& onEvent,
                    const std::atomic<bool>& stop, const WatchOptions& options = {}) const;

  const ClientConfig& config() const;
  const ClientOptions& options() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace podshaper::kube
