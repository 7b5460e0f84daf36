#include "kube/client.h"

// cpprest's U() macro would break fmt (its templates have a parameter named U).
#define _TURN_OFF_PLATFORM_STRING
#include <cpprest/http_client.h>

#include <algorithm>
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <optional>
#include <thread>
#include <vector>

#include "base/json_parse.h"
#include "base/json_util.h"
#include "cli/logging.h"
#include "kube/tls.h"
#include "metrics/metrics.h"

namespace podshaper::kube {

namespace {
const cli::Logger& kLog = cli::logger("kube-client");

namespace http = web::http;
using http::client::http_client;
using http::client::http_client_config;
using nlohmann::json;

// How often a blocked wait looks at the caller's stop flag.
constexpr auto kStopPoll = std::chrono::milliseconds(100);
// How long a stopped request may take to end once cancelled (milliseconds, in practice).
constexpr auto kCancelWait = std::chrono::milliseconds(500);
// Bound service-account tokens rotate (an hour by default); kubelet refreshes the
// file well before expiry, so a minute-old copy is always still valid.
constexpr auto kTokenRefresh = std::chrono::minutes(1);
constexpr std::size_t kReadChunk = 64 * 1024;

// Reads the JSON answers of send() (a GET, a patch) on each thread: one Client serves many
// threads at once, and a reader kept per thread makes simdjson's buffers once, not for
// each answer.
thread_local JsonReader answerReader;

std::string trimmed(std::string s) {
  while (!s.empty() && (s.back() == '\n' || s.back() == '\r' || s.back() == ' ' || s.back() == '\t')) s.pop_back();
  return s;
}

std::string dumpBody(const json& body) { return body.dump(-1, ' ', false, json::error_handler_t::replace); }

std::string withSubresource(const std::string& path, const char* subresource) {
  const auto q = path.find('?');
  if (q == std::string::npos) return path + "/" + subresource;
  return path.substr(0, q) + "/" + subresource + path.substr(q);
}

// Waits for a cpprest task unless `stop` is set first: then cancels the request
// (cpprest closes its socket), waits up to kCancelWait for the task to end, and
// returns nullopt. The task's exception, if any, is rethrown here. An abandoned
// task's exception is observed by the continuation, since pplx terminates the
// process on one that nobody observed. Waiting for the cancelled task keeps its
// cleanup (cpprest closing the response's buffers on its thread pool) inside
// the caller's stop(): returning at once left it racing process exit, where
// LeakSanitizer saw the request's buffers lost.
template <class T>
std::optional<T> waitUnlessStopped(pplx::task<T> task, const std::atomic<bool>& stop,
                                   pplx::cancellation_token_source& cts) {
  if (!task.is_done()) {
    struct State {
      std::mutex mu;
      std::condition_variable cv;
      bool done = false;
    };
    auto state = std::make_shared<State>();
    task.then([state](pplx::task<T> t) {
      try {
        t.wait();
      } catch (...) {
      }
      {
        std::lock_guard lock(state->mu);
        state->done = true;
      }
      state->cv.notify_all();
    });
    std::unique_lock lock(state->mu);
    while (!state->done) {
      if (stop.load()) {
        cts.cancel();
        state->cv.wait_for(lock, kCancelWait, [&] { return state->done; });
        return std::nullopt;
      }
      state->cv.wait_for(lock, kStopPoll);
    }
  }
  return task.get();
}

// Cancels a request when the scope ends, however it ends, so that an abandoned
// watch does not keep its connection open until the server's timeout.
struct CancelOnExit {
  pplx::cancellation_token_source& cts;
  ~CancelOnExit() { cts.cancel(); }
};

}  // namespace

const char* toString(WatchEnd end) {
  switch (end) {
    case WatchEnd::Closed: return "closed";
    case WatchEnd::Gone: return "gone";
    case WatchEnd::Error: return "error";
    case WatchEnd::Stopped: return "stopped";
  }
  return "unknown";
}

struct Client::Impl {
  ClientConfig config;
  ClientOptions options;
  std::optional<std::string> setupError;  // a config no request can succeed with
  std::shared_ptr<const ClientConfig> tlsConfig;
  std::unique_ptr<http_client> http;

  mutable std::mutex tokenMu;
  mutable std::string token;
  mutable std::chrono::steady_clock::time_point tokenReadAt;
  mutable bool tokenRead = false;

  Impl(ClientConfig c, ClientOptions o)
      : config(std::move(c)), options(std::move(o)), tlsConfig(std::make_shared<const ClientConfig>(config)) {
    if (config.server.empty()) {
      setupError = "no API server URL configured";
    } else if (auto tls = checkTlsConfig(config); !tls) {
      setupError = tls.error().message;
    } else {
      try {
        http = makeHttpClient(options.requestTimeout);
      } catch (const std::exception& e) {
        setupError = "server \"" + config.server + "\": " + e.what();
      }
    }
    if (setupError) kLog.error("{}", *setupError);
  }

  std::unique_ptr<http_client> makeHttpClient(std::chrono::milliseconds timeout) const {
    http_client_config c;
    c.set_timeout(timeout);
    c.set_validate_certificates(!config.insecureSkipTlsVerify);
    // A redirect would carry our bearer token to another host.
    c.set_max_redirects(0);
    auto tls = tlsConfig;
    c.set_ssl_context_callback([tls](boost::asio::ssl::context& context) {
      // Checked in the constructor; a failure here cannot come from the config.
      if (auto r = applyTlsConfig(context, *tls); !r) kLog.error("{}", r.error().message);
    });
    return std::make_unique<http_client>(web::uri(config.server), c);
  }

  std::string bearerToken() const {
    if (config.tokenFile.empty()) return config.bearerToken;
    std::lock_guard lock(tokenMu);
    const auto now = std::chrono::steady_clock::now();
    if (!tokenRead || now - tokenReadAt >= kTokenRefresh) {
      tokenRead = true;
      tokenReadAt = now;
      auto r = readFileFromDisk(config.tokenFile);
      std::string fresh = r ? trimmed(*r) : std::string();
      if (!fresh.empty()) {
        token = std::move(fresh);
      } else {
        kLog.warn({{"file", config.tokenFile}}, "token file: {}; using the last token read",
                  r ? std::string("empty") : r.error().message);
      }
    }
    return token.empty() ? config.bearerToken : token;
  }

  http::http_request makeRequest(const http::method& method, const std::string& target, const std::string* body,
                                 std::string_view contentType, std::string_view accept = "application/json") const {
    http::http_request request(method);
    request.set_request_uri(web::uri(target));
    request.headers().add("Accept", std::string(accept));
    request.headers().add("User-Agent", options.userAgent);
    if (const std::string t = bearerToken(); !t.empty()) request.headers().add("Authorization", "Bearer " + t);
    if (body) request.set_body(*body, std::string(contentType));
    return request;
  }

  // One request's answer (its HTTP code, 0 for none) and how long it took, for the metrics.
  void count(const std::string& verb, int code, std::chrono::steady_clock::time_point start) const {
    if (options.metrics == nullptr) return;
    options.metrics
        ->counter("podshaper_kube_client_requests_total",
                  "Requests to the Kubernetes API server, by verb and HTTP code (0: no response).",
                  {{"verb", verb}, {"code", std::to_string(code)}})
        .inc();
    options.metrics
        ->histogram("podshaper_kube_client_request_duration_seconds",
                    "Time from a request to the API server until its answer was read (a watch: until it opened).",
                    {0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30}, {{"verb", verb}})
        .observe(std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
  }

  // Sends the request, resending it after a 429 (see retryDelay), and reads a 2xx answer
  // as JSON. With `stop`, a set flag abandons the request (and any wait to resend) within
  // ~100 ms.
  ApiResult<json> send(const http::method& method, const std::string& target, const std::string* body = nullptr,
                       std::string_view contentType = {}, const std::atomic<bool>* stop = nullptr) const {
    auto text = exchange(method, target, body, contentType, stop, "application/json");
    if (!text) return text.error();
    if (text->empty()) return json::object();
    auto doc = answerReader.read(*text, kMaxObjectDepth);
    if (!doc) {
      ApiError e = transportError(method, target, "response is not JSON (" + doc.error().message + ")");
      e.code = 200;
      return e;
    }
    return std::move(*doc);
  }

  // send()'s exchange: a 2xx answer's body as it came.
  ApiResult<std::string> exchange(const http::method& method, const std::string& target, const std::string* body,
                                  std::string_view contentType, const std::atomic<bool>* stop,
                                  std::string_view accept) const {
    if (setupError) return transportError(method, target, *setupError);
    static const std::atomic<bool> kNeverStop{false};
    const std::atomic<bool>& stopFlag = stop ? *stop : kNeverStop;
    const bool idempotent = method == http::methods::GET;
    for (int attempt = 0;; ++attempt) {
      int status = 0;
      std::string text;
      std::string retryAfter;
      const auto start = std::chrono::steady_clock::now();
      try {
        pplx::cancellation_token_source cts;
        auto response =
            waitUnlessStopped(http->request(makeRequest(method, target, body, contentType, accept), cts.get_token()),
                              stopFlag, cts);
        if (!response) return transportError(method, target, "stopped");
        status = response->status_code();
        if (auto it = response->headers().find("Retry-After"); it != response->headers().end()) retryAfter = it->second;
        auto content = waitUnlessStopped(response->extract_utf8string(true), stopFlag, cts);
        if (!content) return transportError(method, target, "stopped");
        text = std::move(*content);
      } catch (const std::exception& e) {
        count(method, 0, start);
        return transportError(method, target, e.what());
      }
      count(method, status, start);
      if (status >= 200 && status < 300) return text;
      if (attempt < options.maxRetries) {
        if (auto delay = retryDelay(status, retryAfter, idempotent, options.maxRetryDelay)) {
          kLog.warn({{"method", method}, {"path", target.substr(0, target.find('?'))}}, "HTTP {}, retrying in {} ms ({}/{})",
                    status, delay->count(), attempt + 1, options.maxRetries);
          const auto until = std::chrono::steady_clock::now() + *delay;
          while (std::chrono::steady_clock::now() < until) {
            if (stopFlag.load()) return transportError(method, target, "stopped");
            std::this_thread::sleep_for(std::min<std::chrono::steady_clock::duration>(
                kStopPoll, until - std::chrono::steady_clock::now()));
          }
          continue;
        }
      }
      return decodeApiError(method, target, status, text);
    }
  }

  std::string writeTarget(const std::string& path, bool force = false) const {
    return withQuery(path, {{"fieldManager", options.fieldManager}, {"force", force ? "true" : ""}});
  }
};

Client::Client(ClientConfig config, ClientOptions options)
    : impl_(std::make_unique<Impl>(std::move(config), std::move(options))) {}

Client::~Client() = default;

const ClientConfig& Client::config() const { return impl_->config; }
const ClientOptions& Client::options() const { return impl_->options; }

ApiResult<json> Client::get(const std::string& path) const { return impl_->send(http::methods::GET, path); }

ApiResult<std::string> Client::getText(const std::string& path) const {
  return impl_->exchange(http::methods::GET, path, nullptr, {}, nullptr, "text/plain, */*");
}

ApiResult<json> Client::list(const std::string& path, const std::string& labelSelector,
                             const std::string& fieldSelector, const std::atomic<bool>* stop,
                             const std::function<void(json&)>& transform) const {
  json combined;  // the first page's kind, apiVersion and resourceVersion
  json items = json::array();
  // Page by page, item by item: neither the whole list nor a page's tree is ever held.
  const auto keep = [&](json&& item) {
    if (transform) transform(item);
    items.push_back(std::move(item));
  };
  std::string continueToken;
  JsonReader pageReader;  // every page of this list
  const ClientOptions& o = impl_->options;
  int limit = o.listPageBytes > 0 ? std::min(o.listPageSize, kFirstListPage) : o.listPageSize;
  do {
    std::string target = listPagePath(path, labelSelector, fieldSelector, limit, continueToken);
    auto text = impl_->exchange(http::methods::GET, target, nullptr, {}, stop, "application/json");
    if (!text && text.error().isGone() && !continueToken.empty()) {
      // The snapshot behind the continue token was compacted away.
      kLog.info({{"path", path}}, "list: continue token expired, listing again in one request");
      continueToken.clear();
      combined = nullptr;
      items = json::array();
      target = listPagePath(path, labelSelector, fieldSelector, 0, "");
      text = impl_->exchange(http::methods::GET, target, nullptr, {}, stop, "application/json");
    }
    if (!text) return text.error();
    auto page = readListPage(pageReader, *text, kMaxObjectDepth, keep);
    if (!page) {
      ApiError e = transportError("GET", target, page.error().message);
      e.code = 200;
      return e;
    }
    if (combined.is_null()) {
      combined = json::object();
      if (page->kind) combined["kind"] = std::move(*page->kind);
      if (page->apiVersion) combined["apiVersion"] = std::move(*page->apiVersion);
      combined["metadata"] = json::object();
      if (page->resourceVersion) combined["metadata"]["resourceVersion"] = std::move(*page->resourceVersion);
    }
    limit = nextListLimit(text->size(), page->items, o.listPageBytes, o.listPageSize);
    continueToken = std::move(page->continueToken);
  } while (!continueToken.empty());
  combined["items"] = std::move(items);
  return combined;
}

ApiResult<json> Client::create(const std::string& path, const json& body) const {
  const std::string text = dumpBody(body);
  return impl_->send(http::methods::POST, impl_->writeTarget(path), &text, "application/json");
}

ApiResult<json> Client::patch(const std::string& path, const json& body, PatchType type, bool force) const {
  const std::string text = dumpBody(body);
  return impl_->send(http::methods::PATCH, impl_->writeTarget(path, force && type == PatchType::Apply), &text,
                     patchContentType(type));
}

ApiResult<json> Client::replace(const std::string& path, const json& body) const {
  const std::string text = dumpBody(body);
  return impl_->send(http::methods::PUT, impl_->writeTarget(path), &text, "application/json");
}

ApiResult<json> Client::remove(const std::string& path, const json& deleteOptions) const {
  if (deleteOptions.is_null()) return impl_->send(http::methods::DEL, path);
  const std::string text = dumpBody(deleteOptions);
  return impl_->send(http::methods::DEL, path, &text, "application/json");
}

ApiResult<json> Client::patchStatus(const std::string& path, const json& body, PatchType type, bool force) const {
  return patch(withSubresource(path, "status"), body, type, force);
}

ApiResult<json> Client::replaceStatus(const std::string& path, const json& body) const {
  return replace(withSubresource(path, "status"), body);
}

WatchStatus Client::watch(const std::string& path, const std::string& resourceVersion, const WatchHandler& onEvent,
                          const std::atomic<bool>& stop, const WatchOptions& options) const {
  WatchStatus result;
  result.resourceVersion = resourceVersion;
  const std::string target = watchPath(path, resourceVersion, options);
  auto finish = [&result](WatchEnd end, ApiError error = {}) {
    result.end = end;
    result.error = std::move(error);
    return result;
  };
  if (impl_->setupError) return finish(WatchEnd::Error, transportError("GET", target, *impl_->setupError));
  if (stop.load()) return finish(WatchEnd::Stopped);

  pplx::cancellation_token_source cts;
  CancelOnExit cancelOnExit{cts};
  try {
    // A watch idles between events: its read timeout must outlast the server's.
    const std::chrono::milliseconds idle = options.timeoutSeconds > 0
                                               ? std::chrono::seconds(options.timeoutSeconds + 60)
                                               : std::chrono::seconds(3600);
    auto client = impl_->makeHttpClient(idle);
    const auto start = std::chrono::steady_clock::now();
    auto response = waitUnlessStopped(
        client->request(impl_->makeRequest(http::methods::GET, target, nullptr, {}), cts.get_token()), stop, cts);
    if (!response) return finish(WatchEnd::Stopped);

    const int status = response->status_code();
    impl_->count("WATCH", status, start);
    if (status != 200) {
      auto body = waitUnlessStopped(response->extract_utf8string(true), stop, cts);
      if (!body) return finish(WatchEnd::Stopped);
      return finish(status == 410 ? WatchEnd::Gone : WatchEnd::Error, decodeApiError("GET", target, status, *body));
    }

    auto buffer = response->body().streambuf();
    LineSplitter lines;
    JsonReader lineReader;  // every line of this stream
    std::vector<std::uint8_t> chunk(kReadChunk);
    for (;;) {
      while (auto line = lines.next()) {
        if (line->empty()) continue;
        auto event = decodeWatchLine(lineReader, *line);
        if (!event) {
          ApiError e = transportError("GET", target, event.error().message);
          e.code = 200;
          return finish(WatchEnd::Error, std::move(e));
        }
        if (event->type == "ERROR") {
          const json& s = event->object;
          const int code = s.contains("code") && s["code"].is_number_integer() ? s["code"].get<int>() : 0;
          std::string reason = stringMember(s, "reason");
          std::string message = "watch " + path + ": ERROR event: " + (code ? std::to_string(code) + " " : "") +
                                describeStatus(s);
          return finish(isGoneEvent(*event) ? WatchEnd::Gone : WatchEnd::Error,
                        makeApiError(code, std::move(reason), std::move(message)));
        }
        if (std::string rv = resourceVersionOf(event->object); !rv.empty()) result.resourceVersion = std::move(rv);
        ++result.events;
        if (!onEvent(*event)) return finish(WatchEnd::Stopped);
      }
      if (stop.load()) return finish(WatchEnd::Stopped);

      bool fits = true;
      if (const std::size_t available = buffer.in_avail(); available > 0) {
        // Data already here: take it in one piece.
        const std::size_t n = buffer.getn(chunk.data(), std::min(available, chunk.size())).get();
        fits = lines.append(std::string_view(reinterpret_cast<const char*>(chunk.data()), n));
      } else {
        // Nothing here: wait for the next byte (or the end), looking at `stop`.
        auto c = waitUnlessStopped(buffer.bumpc(), stop, cts);
        if (!c) return finish(WatchEnd::Stopped);
        if (*c == concurrency::streams::char_traits<std::uint8_t>::eof()) break;
        const char byte = static_cast<char>(*c);
        fits = lines.append(std::string_view(&byte, 1));
      }
      if (!fits) return finish(WatchEnd::Error, transportError("GET", target, "watch event line exceeds 64 MiB"));
    }

    // End of the body: a clean close by the server, or a broken connection?
    try {
      response->content_ready().wait();
    } catch (const std::exception& e) {
      return finish(WatchEnd::Error, transportError("GET", target, std::string("watch stream broke: ") + e.what()));
    }
    if (lines.pending() > 0) {
      return finish(WatchEnd::Error, transportError("GET", target, "watch stream ended inside an event"));
    }
    return finish(WatchEnd::Closed);
  } catch (const std::exception& e) {
    if (stop.load()) return finish(WatchEnd::Stopped);
    return finish(WatchEnd::Error, transportError("GET", target, e.what()));
  }
}

}  // namespace podshaper::kube
