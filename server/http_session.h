#pragma once

// One TLS connection serving HTTP/1.1 requests, and the state the connections
// share. Internal to server/ (https_server.cc is its only user).

#include <boost/asio/ip/tcp.hpp>

#include <array>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>

#include "metrics/metrics.h"
#include "server/https_server.h"
#include "server/tls_context.h"

namespace podshaper::server {

// Request metrics of one path label. Counters by status code are looked up in
// the registry once and then cached, so recording is a few atomic operations.
class PathStats {
 public:
  PathStats(metrics::Registry& metrics, std::string pathLabel);
  void record(int status, double seconds);

 private:
  static constexpr int kMinStatus = 100;
  static constexpr int kMaxStatus = 599;
  metrics::Registry& metrics_;
  const std::string pathLabel_;
  metrics::Histogram& duration_;
  std::array<std::atomic<metrics::Counter*>, kMaxStatus - kMinStatus + 1> byStatus_{};
};

struct Route {
  std::map<std::string, Handler> byMethod;
  std::string allow;  // "GET, POST" for a 405's Allow header
  std::unique_ptr<PathStats> stats;
};

// An open connection, as the server sees it during a graceful shutdown.
class Connection {
 public:
  virtual ~Connection() = default;
  // The listener has closed: wind down (from any thread; the connection does
  // it on its own strand). An idle connection closes, a busy one finishes its
  // request first.
  virtual void drain() = 0;
};

// Shared by every connection. Routes are fixed once the server has started, so
// connections read them without a lock.
class ServerState {
 public:
  ServerState(ServerOptions options, std::shared_ptr<metrics::Registry> metrics);

  const ServerOptions& options() const { return options_; }
  metrics::Registry& metrics() { return *metrics_; }

  void addRoute(std::string method, std::string path, Handler handler);
  const Route* findRoute(const std::string& path) const;
  // Stats for a path: its route's, or those labelled "other" for unknown paths,
  // so a scanner's made-up paths cannot grow the label set.
  PathStats& statsFor(const std::string& path);

  bool admitConnection();  // false (and counted) when at maxConnections
  void connectionOpened();
  void connectionClosed();
  void handshakeFailed(const std::string& peer, const boost::system::error_code& ec);

  // Graceful shutdown (HttpsServer::beginDrain and shutdown).
  // draining: every response from now on says Connection: close.
  void beginDrain() { draining_.store(true, std::memory_order_relaxed); }
  bool draining() const { return draining_.load(std::memory_order_relaxed); }
  // closing: the listener is closed; idle connections close (also draining).
  void beginClose();
  bool closing() const { return closing_.load(std::memory_order_relaxed); }
  // Open connections, so that drainConnections() can reach the idle ones.
  void track(const std::shared_ptr<Connection>& connection);
  void untrack(const Connection* connection);
  void drainConnections();  // drain() on every tracked connection
  std::size_t openConnections() const { return activeConnections_.load(std::memory_order_relaxed); }
  // True once no connection is open; false at `deadline` if some still are.
  bool waitForNoConnections(std::chrono::steady_clock::time_point deadline);

 private:
  const ServerOptions options_;
  std::shared_ptr<metrics::Registry> metrics_;
  std::map<std::string, Route> routes_;
  PathStats unmatched_;
  metrics::Counter& handshakeErrors_;
  metrics::Counter& rejectedConnections_;
  metrics::Gauge& activeConnectionsGauge_;
  std::atomic<std::size_t> activeConnections_{0};
  std::atomic<std::int64_t> lastRejectLogNs_{0};

  std::atomic<bool> draining_{false};
  std::atomic<bool> closing_{false};
  std::mutex trackedMutex_;
  std::unordered_map<const Connection*, std::weak_ptr<Connection>> tracked_;
  std::mutex closedMutex_;  // with closedCv_: waitForNoConnections
  std::condition_variable closedCv_;
};

// Runs a connection until it closes: TLS handshake, then requests. The socket
// must have its own strand as executor; the session keeps `tls` alive for as
// long as it lives, whatever context the server serves new connections with.
void startSession(boost::asio::ip::tcp::socket socket, TlsContextPtr tls,
                  std::shared_ptr<ServerState> state);

}  // namespace podshaper::server
