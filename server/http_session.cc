#include "server/http_session.h"

#include <boost/asio/dispatch.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/write.hpp>
#include <boost/asio/ssl/error.hpp>
#include <boost/asio/ssl/stream_base.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <boost/beast/ssl/ssl_stream.hpp>

#include <chrono>
#include <optional>
#include <vector>

#include "cli/logging.h"

namespace podshaper::server {

namespace {
const cli::Logger& kLog = cli::logger("https");

namespace beast = boost::beast;
namespace http = beast::http;
namespace net = boost::asio;
using tcp = net::ip::tcp;
using Clock = std::chrono::steady_clock;

constexpr std::size_t kHeaderLimit = 16 * 1024;
// A TLS record holds up to 16 KiB: room for one whole, so that a review (header and
// body, mostly one record) comes in one read.
constexpr std::size_t kFirstReadBytes = 16 * 1024;
constexpr std::chrono::seconds kShutdownTimeout{2};
constexpr auto kRejectLogInterval = std::chrono::seconds(10);

const std::vector<double> kDurationBuckets = {0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025,
                                              0.05,   0.1,   0.25,   0.5,   1,    2.5};

// Ordinary ends of a connection: the client went away or stayed silent.
bool isQuietClose(const beast::error_code& ec) {
  return ec == net::error::eof || ec == net::ssl::error::stream_truncated ||
         ec == net::error::connection_reset || ec == net::error::broken_pipe ||
         ec == net::error::operation_aborted || ec == beast::error::timeout ||
         ec == http::error::end_of_stream || ec == http::error::partial_message;
}

Response plain(int status, std::string body) {
  return Response{status, "text/plain; charset=utf-8", std::move(body)};
}

class Session : public Connection, public std::enable_shared_from_this<Session> {
 public:
  Session(tcp::socket socket, TlsContextPtr tls, std::shared_ptr<ServerState> state)
      : tls_(std::move(tls)), state_(std::move(state)), stream_(std::move(socket), *tls_) {
    beast::error_code ec;
    auto remote = lowest().socket().remote_endpoint(ec);
    peer_ = ec ? std::string("unknown peer")
               : remote.address().to_string() + ":" + std::to_string(remote.port());
    state_->connectionOpened();
  }
  ~Session() override {
    state_->untrack(this);
    state_->connectionClosed();
  }

  void start() {
    state_->track(shared_from_this());
    net::dispatch(stream_.get_executor(), [self = shared_from_this()] { self->handshake(); });
  }

  void drain() override {
    net::post(stream_.get_executor(), [self = shared_from_this()] { self->onDrain(); });
  }

 private:
  // Where the connection is, for a graceful shutdown: only `idle` ones may be
  // closed under the client; a `busy` one is reading, handling or answering a
  // request, and its response will say Connection: close; `closing` ones are
  // closing or closed.
  enum class Phase { handshake, idle, busy, closing };

  const ServerOptions& options() const { return state_->options(); }
  beast::tcp_stream& lowest() { return beast::get_lowest_layer(stream_); }

  void handshake() {
    phase_ = Phase::handshake;
    lowest().expires_after(options().readTimeout);
    stream_.async_handshake(net::ssl::stream_base::server,
                            [self = shared_from_this()](beast::error_code ec) {
                              if (ec) {
                                self->ended();
                                // Cut off by a shutdown, not a failed handshake.
                                if (!self->drainClosed_) {
                                  self->state_->handshakeFailed(self->peer_, ec);
                                }
                                return;
                              }
                              self->awaitRequest();
                            });
  }

  // Between requests the connection may idle for idleTimeout; once the first
  // byte of a request arrives, the whole request must follow within
  // readTimeout, so a client trickling bytes cannot hold the connection.
  void awaitRequest() {
    if (buffer_.size() > 0) {  // pipelined: the next request is already here
      readHeader();
      return;
    }
    phase_ = Phase::idle;
    if (state_->closing()) {
      // Only a connection that has not had a request yet gets here now (the
      // others were answered with Connection: close): a client that connected
      // just before the listener closed gets the grace to send its request.
      armDrainGrace();
    }
    lowest().expires_after(options().idleTimeout);
    stream_.async_read_some(buffer_.prepare(kFirstReadBytes),
                            [self = shared_from_this()](beast::error_code ec, std::size_t n) {
                              if (ec) {
                                if (ec == net::error::operation_aborted && self->drainClosed_) {
                                  self->close();  // closeIdle(): close_notify, then the socket
                                } else {
                                  self->dropped(ec);
                                }
                                return;
                              }
                              self->phase_ = Phase::busy;
                              self->buffer_.commit(n);
                              self->readHeader();
                            });
  }

  void readHeader() {
    phase_ = Phase::busy;
    parser_.emplace();
    parser_->header_limit(kHeaderLimit);
    parser_->body_limit(options().maxBodyBytes);
    lowest().expires_after(options().readTimeout);
    if (beast::error_code ec; parseBuffered(false, ec)) {
      if (ec) readFailed(ec);
      else onHeader();
      return;
    }
    http::async_read_header(stream_, buffer_, *parser_,
                            [self = shared_from_this()](beast::error_code ec, std::size_t) {
                              if (ec) {
                                self->readFailed(ec);
                                return;
                              }
                              self->onHeader();
                            });
  }

  void onHeader() {
    started_ = Clock::now();
    auto& header = parser_->get();
    // curl and others wait (a second, by default) for this before sending a body.
    if (beast::iequals(header[http::field::expect], "100-continue") && !parser_->is_done()) {
      interim_.emplace(http::status::continue_, header.version());
      http::async_write(stream_, *interim_,
                        [self = shared_from_this()](beast::error_code ec, std::size_t) {
                          if (ec) {
                            self->dropped(ec);
                            return;
                          }
                          self->readBody();
                        });
      return;
    }
    readBody();
  }

  void readBody() {
    if (beast::error_code ec; parser_->is_done() || parseBuffered(true, ec)) {
      if (ec) readFailed(ec);
      else onRequest();
      return;
    }
    http::async_read(stream_, buffer_, *parser_,
                     [self = shared_from_this()](beast::error_code ec, std::size_t) {
                       if (ec) {
                         self->readFailed(ec);
                         return;
                       }
                       self->onRequest();
                     });
  }

  // Feeds the parser what has been read already, as Beast's reads would: most requests are
  // whole in the first read, and parsed here they need no further asynchronous operation.
  // True when the header (`message` false) or the whole message is parsed, or on an error;
  // false when more must be read.
  bool parseBuffered(bool message, beast::error_code& ec) {
    auto parsed = [&] { return message ? parser_->is_done() : parser_->is_header_done(); };
    while (!parsed() && buffer_.size() > 0) {
      const std::size_t used = parser_->put(buffer_.data(), ec);
      buffer_.consume(used);
      if (ec == http::error::need_more) {
        ec = {};
        return false;
      }
      if (ec) return true;
      if (used == 0) return false;
    }
    return parsed();
  }

  void readFailed(const beast::error_code& ec) {
    if (started_ == Clock::time_point{}) started_ = Clock::now();
    if (ec == http::error::body_limit) {
      kLog.warn({{"method", methodSeen()}, {"path", pathSeen()}, {"peer", peer_}},
                "body larger than {} bytes, refused", options().maxBodyBytes);
      respond(plain(413, "request body larger than " + std::to_string(options().maxBodyBytes) +
                             " bytes\n"),
              {}, false);
    } else if (ec == http::error::header_limit) {
      kLog.warn({{"peer", peer_}}, "request header larger than {} bytes, refused", kHeaderLimit);
      respond(plain(431, "request header too large\n"), {}, false);
    } else if (isQuietClose(ec)) {
      dropped(ec);
    } else if (ec.category() == http::make_error_code(http::error::bad_target).category()) {
      kLog.debug({{"peer", peer_}}, "malformed request: {}", ec.message());
      respond(plain(400, "malformed HTTP request\n"), {}, false);
    } else {
      dropped(ec);
    }
  }

  void onRequest() {
    auto& message = parser_->get();
    Request request;
    request.method = std::string(message.method_string());
    beast::string_view rawTarget = message.target();
    std::string_view target(rawTarget.data(), rawTarget.size());
    auto question = target.find('?');
    request.path = std::string(target.substr(0, question));
    if (question != std::string_view::npos) {
      request.query = std::string(target.substr(question + 1));
    }
    request.contentType = std::string(message[http::field::content_type]);
    request.body = std::move(message.body());

    const Route* route = state_->findRoute(request.path);
    if (route == nullptr) {
      respond(plain(404, "not found\n"), {}, message.keep_alive());
      return;
    }
    auto handler = route->byMethod.find(request.method);
    if (handler == route->byMethod.end()) {
      respond(plain(405, "method not allowed\n"), route->allow, message.keep_alive());
      return;
    }
    Response response;
    try {
      response = handler->second(request);
    } catch (const std::exception& e) {
      kLog.error({{"method", request.method}, {"path", request.path}}, "handler threw: {}", e.what());
      response = plain(500, "internal error\n");
    } catch (...) {
      kLog.error({{"method", request.method}, {"path", request.path}}, "handler threw a non-exception");
      response = plain(500, "internal error\n");
    }
    if (response.status < 200 || response.status > 599 ||
        response.contentType.find_first_of("\r\n") != std::string::npos) {
      kLog.error({{"method", request.method}, {"path", request.path}},
                 "handler returned status {} with content type \"{}\"", response.status, response.contentType);
      response = plain(500, "internal error\n");
    }
    if (response.status == 204 || response.status == 304) {
      response.body.clear();  // these carry no body (RFC 9110)
    }
    respond(std::move(response), {}, message.keep_alive());
  }

  void respond(Response response, const std::string& allow, bool keepAlive) {
    // While the server drains, every answer ends its connection: the client's
    // next request opens a new one, which goes to a replica that stays.
    keepAlive_ = keepAlive && !state_->draining();
    // Recorded before the write, so a client that has its response also sees
    // it counted (tests, and anyone reading /metrics right after a call).
    state_->statsFor(pathSeen())
        .record(response.status, std::chrono::duration<double>(Clock::now() - started_).count());
    unsigned version = parser_ && parser_->is_header_done() ? parser_->get().version() : 11;
    // The response written out here, as Beast's serializer would write it, and sent as one
    // buffer: one write for one answer, through the fewest asynchronous operations.
    const auto status = static_cast<http::status>(response.status);
    const bool bodyless = response.status == 204 || response.status == 304;
    out_.clear();
    out_ += version == 10 ? "HTTP/1.0 " : "HTTP/1.1 ";
    out_ += std::to_string(response.status);
    out_ += ' ';
    const beast::string_view reason = http::obsolete_reason(status);
    out_.append(reason.data(), reason.size());
    out_ += "\r\nServer: podshaper\r\nContent-Type: ";
    out_ += response.contentType;
    out_ += "\r\nX-Content-Type-Options: nosniff\r\n";
    if (!allow.empty()) out_ += "Allow: " + allow + "\r\n";
    if (version == 10 && keepAlive_) out_ += "Connection: keep-alive\r\n";
    if (version != 10 && !keepAlive_) out_ += "Connection: close\r\n";
    if (!bodyless) out_ += "Content-Length: " + std::to_string(response.body.size()) + "\r\n";
    out_ += "\r\n";
    if (!bodyless) out_ += response.body;
    lowest().expires_after(options().readTimeout);
    net::async_write(stream_, net::buffer(out_),
                     [self = shared_from_this()](beast::error_code ec, std::size_t) { self->onWritten(ec); });
  }

  void onWritten(const beast::error_code& ec) {
    if (ec) {
      dropped(ec);
      return;
    }
    ++served_;
    if (!keepAlive_) {
      close();
      return;
    }
    interim_.reset();
    parser_.reset();
    started_ = {};
    awaitRequest();
  }

  // close_notify, then the socket; a peer that never answers the close_notify
  // gets kShutdownTimeout.
  void close() {
    phase_ = Phase::closing;
    lowest().expires_after(kShutdownTimeout);
    stream_.async_shutdown([self = shared_from_this()](beast::error_code) {
      beast::error_code ignored;
      self->lowest().socket().shutdown(tcp::socket::shutdown_both, ignored);
      self->lowest().close();
      self->ended();
    });
  }

  void dropped(const beast::error_code& ec) {
    kLog.debug({{"peer", peer_}}, "connection closed: {}", ec.message());
    ended();
  }

  // The connection is over: nothing of ours may keep the session (and the
  // server's count of open connections) alive any longer, a drain included.
  void ended() {
    phase_ = Phase::closing;
    if (drainGrace_) drainGrace_->cancel();
  }

  // The listener has closed (ServerState::drainConnections).
  void onDrain() {
    switch (phase_) {
      case Phase::idle:
        if (served_ > 0) {
          closeIdle();
          return;
        }
        armDrainGrace();
        return;
      case Phase::handshake:
        armDrainGrace();
        return;
      case Phase::busy:     // its response says Connection: close
      case Phase::closing:
        return;
    }
  }

  // A connection that has not sent a request yet may be a client that
  // connected just before the listener closed (its request follows within
  // milliseconds) or one that never will (a probe, a pre-opened connection,
  // a slow-loris). HttpsServer::kDrainGrace from its accept tells them apart.
  void armDrainGrace() {
    if (drainGrace_) return;
    drainGrace_.emplace(stream_.get_executor());
    drainGrace_->expires_at(acceptedAt_ + HttpsServer::kDrainGrace);
    drainGrace_->async_wait([self = shared_from_this()](const beast::error_code& ec) {
      if (ec) return;
      if (self->phase_ == Phase::handshake) {
        self->drainClosed_ = true;
        self->lowest().close();  // no TLS session to close politely yet
      } else if (self->phase_ == Phase::idle) {
        self->closeIdle();
      }
    });
  }

  // Ends the wait for the next request; its handler sends the close_notify.
  void closeIdle() {
    if (drainClosed_) return;
    drainClosed_ = true;
    lowest().cancel();
  }

  std::string methodSeen() const {
    return parser_ ? std::string(parser_->get().method_string()) : std::string("?");
  }
  std::string pathSeen() const {
    if (!parser_) return {};
    beast::string_view rawTarget = parser_->get().target();
    std::string_view target(rawTarget.data(), rawTarget.size());
    return std::string(target.substr(0, target.find('?')));
  }

  TlsContextPtr tls_;  // before stream_: the stream's SSL object uses it
  std::shared_ptr<ServerState> state_;
  beast::ssl_stream<beast::tcp_stream> stream_;
  beast::flat_buffer buffer_;
  std::optional<http::request_parser<http::string_body>> parser_;
  std::optional<http::response<http::empty_body>> interim_;
  std::string out_;  // the response being written
  std::string peer_;
  Clock::time_point started_{};
  bool keepAlive_ = false;
  // Graceful shutdown; touched on the connection's strand only.
  const Clock::time_point acceptedAt_ = Clock::now();
  Phase phase_ = Phase::handshake;
  std::uint64_t served_ = 0;    // responses written
  bool drainClosed_ = false;    // we ended the connection for the shutdown
  std::optional<net::steady_timer> drainGrace_;
};

}  // namespace

PathStats::PathStats(metrics::Registry& metrics, std::string pathLabel)
    : metrics_(metrics),
      pathLabel_(std::move(pathLabel)),
      duration_(metrics.histogram(
          "podshaper_http_request_duration_seconds",
          "Time from a request's header to its response being sent, by path.", kDurationBuckets,
          {{"path", pathLabel_}})) {}

void PathStats::record(int status, double seconds) {
  duration_.observe(seconds);
  if (status < kMinStatus || status > kMaxStatus) status = 500;
  auto& slot = byStatus_[static_cast<std::size_t>(status - kMinStatus)];
  metrics::Counter* counter = slot.load(std::memory_order_acquire);
  if (counter == nullptr) {
    // Two threads may both get here; the registry hands both the same counter.
    counter = &metrics_.counter("podshaper_http_requests_total",
                                "HTTP requests answered, by path and status code.",
                                {{"code", std::to_string(status)}, {"path", pathLabel_}});
    slot.store(counter, std::memory_order_release);
  }
  counter->inc();
}

ServerState::ServerState(ServerOptions options, std::shared_ptr<metrics::Registry> metrics)
    : options_(std::move(options)),
      metrics_(metrics ? std::move(metrics) : std::make_shared<metrics::Registry>()),
      unmatched_(*metrics_, "other"),
      handshakeErrors_(metrics_->counter("podshaper_tls_handshake_errors_total",
                                         "TLS handshakes that failed.")),
      rejectedConnections_(
          metrics_->counter("podshaper_http_connections_rejected_total",
                            "Connections closed at once because maxConnections were open.")),
      activeConnectionsGauge_(
          metrics_->gauge("podshaper_http_connections_active", "Open connections.")) {}

void ServerState::addRoute(std::string method, std::string path, Handler handler) {
  Route& route = routes_[path];
  route.byMethod[std::move(method)] = std::move(handler);
  route.allow.clear();
  for (const auto& [m, h] : route.byMethod) route.allow += (route.allow.empty() ? "" : ", ") + m;
  if (!route.stats) route.stats = std::make_unique<PathStats>(*metrics_, std::move(path));
}

const Route* ServerState::findRoute(const std::string& path) const {
  auto it = routes_.find(path);
  return it == routes_.end() ? nullptr : &it->second;
}

PathStats& ServerState::statsFor(const std::string& path) {
  auto it = routes_.find(path);
  return it == routes_.end() ? unmatched_ : *it->second.stats;
}

bool ServerState::admitConnection() {
  if (activeConnections_.load(std::memory_order_relaxed) < options_.maxConnections) return true;
  rejectedConnections_.inc();
  auto now = Clock::now().time_since_epoch().count();
  auto last = lastRejectLogNs_.load(std::memory_order_relaxed);
  auto interval = std::chrono::duration_cast<Clock::duration>(kRejectLogInterval).count();
  if (now - last >= interval &&
      lastRejectLogNs_.compare_exchange_strong(last, now, std::memory_order_relaxed)) {
    kLog.warn("{} connections open (maxConnections), closing new ones", options_.maxConnections);
  }
  return false;
}

void ServerState::connectionOpened() {
  activeConnections_.fetch_add(1, std::memory_order_relaxed);
  activeConnectionsGauge_.inc();
}

void ServerState::connectionClosed() {
  activeConnections_.fetch_sub(1, std::memory_order_relaxed);
  activeConnectionsGauge_.dec();
  if (closing()) {
    // After the count, under the lock: a waiter either sees the new count or
    // is already waiting and is woken.
    std::lock_guard lock(closedMutex_);
    closedCv_.notify_all();
  }
}

void ServerState::beginClose() {
  beginDrain();
  closing_.store(true, std::memory_order_relaxed);
}

void ServerState::track(const std::shared_ptr<Connection>& connection) {
  std::lock_guard lock(trackedMutex_);
  tracked_.emplace(connection.get(), connection);
}

void ServerState::untrack(const Connection* connection) {
  std::lock_guard lock(trackedMutex_);
  tracked_.erase(connection);
}

void ServerState::drainConnections() {
  std::vector<std::shared_ptr<Connection>> open;
  {
    std::lock_guard lock(trackedMutex_);
    open.reserve(tracked_.size());
    for (const auto& [key, weak] : tracked_) {
      // Expired: its destructor is waiting for the lock to untrack it.
      if (auto connection = weak.lock()) open.push_back(std::move(connection));
    }
  }
  for (const auto& connection : open) connection->drain();
}

bool ServerState::waitForNoConnections(Clock::time_point deadline) {
  std::unique_lock lock(closedMutex_);
  return closedCv_.wait_until(lock, deadline, [this] {
    return activeConnections_.load(std::memory_order_relaxed) == 0;
  });
}

void ServerState::handshakeFailed(const std::string& peer, const boost::system::error_code& ec) {
  handshakeErrors_.inc();
  // A TCP probe or a client hanging up is routine; a refused protocol, cipher
  // or certificate (e.g. "tlsv1 alert unknown ca": a wrong caBundle) is not.
  if (isQuietClose(ec)) {
    kLog.debug({{"peer", peer}}, "TLS handshake ended: {}", ec.message());
  } else {
    kLog.warn({{"peer", peer}}, "TLS handshake failed: {}", ec.message());
  }
}

void startSession(tcp::socket socket, TlsContextPtr tls, std::shared_ptr<ServerState> state) {
  std::make_shared<Session>(std::move(socket), std::move(tls), std::move(state))->start();
}

}  // namespace podshaper::server
