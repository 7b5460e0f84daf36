#pragma once

// The HTTPS server shared by the webhook, the operator and the agent:
// HTTP/1.1 with keep-alive over TLS 1.2+, exact-path routing, certificate hot
// reload, Prometheus request metrics. Boost.Beast stays behind the pimpl, so
// including this header costs little.
//
//   auto metrics = std::make_shared<podshaper::metrics::Registry>();
//   podshaper::server::HttpsServer server({.port = 8443, .certFile = c, .keyFile = k}, metrics);
//   server.route("GET", "/healthz", [](const auto&) { return Response{.body = "ok\n"}; });
//   if (auto started = server.start(); !started) { /* started.error().message */ }

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>

#include "base/result.h"
#include "metrics/metrics.h"

namespace podshaper::server {

struct Request {
  // Every member has an initializer so that designated initializers may leave
  // any out under -Wextra (-Wmissing-field-initializers).
  std::string method{};       // "GET"
  std::string path{};         // the target without its query: "/mutate"
  std::string query{};        // after '?', undecoded: "timeout=10s"
  std::string body{};
  std::string contentType{};  // the Content-Type header, as sent
};

struct Response {
  int status = 200;  // 200..599; anything else becomes a 500
  std::string contentType = "text/plain; charset=utf-8";
  std::string body{};
};

// Runs on one of the server's threads; a handler that blocks holds that thread.
// An exception becomes a 500 ("internal error") and an error log.
using Handler = std::function<Response(const Request&)>;

struct ServerOptions {
  std::string host = "0.0.0.0";  // an IP address; "::" listens on IPv4 and IPv6
  std::uint16_t port = 8443;     // 0: an ephemeral port, see boundPort()
  std::string certFile{};  // PEM; may append intermediates after the leaf
  std::string keyFile{};   // PEM, unencrypted
  std::size_t maxBodyBytes = 3 * 1024 * 1024;  // larger: 413 and the connection closes
  std::chrono::seconds readTimeout{10};  // a whole request (after its first byte), and a write
  std::chrono::seconds idleTimeout{60};  // keep-alive wait for the next request
  int threads = 2;
  std::chrono::milliseconds certCheckInterval{2000};
  std::size_t maxConnections = 1024;     // beyond: new connections are closed at once
  // SO_REUSEPORT (Linux) besides SO_REUSEADDR: several processes of one user
  // may listen on the same port and the kernel spreads new connections over
  // them (two replicas on one host, or an old and a new process during a
  // restart). A port held by a socket without it, or by another user, still
  // fails start() with "cannot bind".
  bool reusePort = true;
};

// Metrics it records in the registry it is given:
//   podshaper_http_requests_total{code,path}            counter
//   podshaper_http_request_duration_seconds{path}       histogram, 0.5 ms .. 2.5 s
//   podshaper_http_connections_active                   gauge
//   podshaper_http_connections_rejected_total           counter (maxConnections)
//   podshaper_tls_handshake_errors_total                counter
//   podshaper_tls_certificate_reloads_total             counter
//   podshaper_tls_certificate_reload_errors_total       counter (new files that did not load)
//   podshaper_tls_certificate_expiry_timestamp_seconds  gauge
// `path` is a registered route's path, or "other" for any unknown one.
//
// Shutting down: stop() drops everything at once (tests, error paths);
// beginDrain() and shutdown() answer what was sent first (SIGTERM in a pod:
// readiness off, beginDrain, wait for the endpoint to go, shutdown).
class HttpsServer {
 public:
  // A null `metrics` gives the server a registry of its own.
  HttpsServer(ServerOptions options, std::shared_ptr<metrics::Registry> metrics);
  ~HttpsServer();  // stop()
  HttpsServer(const HttpsServer&) = delete;
  HttpsServer& operator=(const HttpsServer&) = delete;

  // Exact path match: an unknown path is a 404, a known path with another
  // method a 405 (with Allow). Register routes before start(); later calls are
  // refused with an error log.
  void route(std::string method, std::string path, Handler handler);

  // Loads the certificate and key, binds, listens and starts the threads. An
  // error says what failed: an unreadable or invalid certificate or key, a key
  // that does not match, an address that does not parse or cannot be bound.
  // A server starts once.
  Result<void> start();

  // Stops accepting, drops open connections (in-flight requests included) and
  // joins the threads. Idempotent. Not from a handler: it would join itself.
  void stop();

  // Graceful shutdown, first step: from now on every response carries
  // `Connection: close`, so clients finish what they sent and open their next
  // connection elsewhere (once the endpoint is gone, to another replica); the
  // server still accepts and serves. Idempotent; any thread, a handler included.
  void beginDrain();

  // Graceful shutdown: beginDrain(), then closes the listener (connections
  // already queued in it are accepted first, so none is reset), closes
  // connections idle between requests, gives a connection that has not sent
  // its first request yet (or is still in its TLS handshake) kDrainGrace, lets
  // requests in flight finish and answers each with `Connection: close`. Waits
  // until every connection has closed or `timeout` has passed, then stop()
  // (which drops any left). True when every connection closed in time. Not
  // from a handler; after it the server is stopped.
  bool shutdown(std::chrono::milliseconds timeout);
  static constexpr std::chrono::milliseconds kDrainGrace{2000};

  std::uint16_t boundPort() const;
  std::uint64_t certReloads() const;  // successful hot reloads since start()

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// The routes every podshaper server has: GET /healthz (always ok), /readyz (503 with
// the reason `notReady` gives, ok when it gives none) and /metrics (the registry in
// Prometheus' text format).
void routeProbes(HttpsServer& https, std::shared_ptr<metrics::Registry> registry,
                 std::function<std::optional<std::string>()> notReady);

}  // namespace podshaper::server
