#include "server/https_server.h"

#include <boost/asio/detail/socket_option.hpp>
#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/ip/v6_only.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/strand.hpp>
#include <sys/socket.h>

#include <future>
#include <mutex>
#include <optional>
#include <thread>
#include <vector>

#include "cli/logging.h"
#include "metrics/process.h"
#include "server/http_session.h"
#include "server/tls_context.h"

namespace podshaper::server {

namespace net = boost::asio;
using tcp = net::ip::tcp;

namespace {
const cli::Logger& kLog = cli::logger("https");
constexpr std::chrono::milliseconds kAcceptRetryDelay{100};
#ifdef SO_REUSEPORT
using reuse_port = net::detail::socket_option::boolean<SOL_SOCKET, SO_REUSEPORT>;
#endif
}  // namespace

struct HttpsServer::Impl {
  Impl(ServerOptions options, std::shared_ptr<metrics::Registry> metrics)
      : state(std::make_shared<ServerState>(std::move(options), std::move(metrics))),
        certs(state->options().certFile, state->options().keyFile),
        reloadsTotal(state->metrics().counter("podshaper_tls_certificate_reloads_total",
                                              "Serving certificates replaced without a restart.")),
        reloadErrorsTotal(state->metrics().counter(
            "podshaper_tls_certificate_reload_errors_total",
            "Checks that found new certificate files which did not load (old one kept).")),
        certificateExpiry(state->metrics().gauge(
            "podshaper_tls_certificate_expiry_timestamp_seconds",
            "When the serving certificate expires, in Unix seconds.")) {}

  ~Impl() { stop(); }

  Result<void> start();
  void stop();
  bool shutdown(std::chrono::milliseconds timeout);
  void accept();
  void onAccept(const boost::system::error_code& ec, tcp::socket socket);
  void admit(tcp::socket socket);
  void closeListener();
  void scheduleCertificateCheck();
  void runLoop();

  const ServerOptions& options() const { return state->options(); }

  std::shared_ptr<ServerState> state;
  CertificateReloader certs;
  metrics::Counter& reloadsTotal;
  metrics::Counter& reloadErrorsTotal;
  metrics::Gauge& certificateExpiry;

  std::mutex lifecycle;  // start/stop/route
  bool started = false;
  bool stopped = false;
  std::atomic<std::uint16_t> port{0};
  // Built by start(), torn down by stop() in reverse order: everything that
  // uses the io_context goes before it, and destroying it destroys the
  // sessions still waiting on it, which closes their sockets.
  std::optional<net::io_context> ioc;
  std::optional<net::executor_work_guard<net::io_context::executor_type>> work;
  // The acceptor, its retry timer and `listening` are used on this strand
  // only, so that shutdown() can close the listener between two accepts.
  std::optional<net::strand<net::io_context::executor_type>> acceptStrand;
  std::optional<tcp::acceptor> acceptor;
  bool listening = false;
  std::optional<net::steady_timer> acceptRetry;
  std::optional<net::steady_timer> certTimer;
  std::vector<std::thread> threads;
};

Result<void> HttpsServer::Impl::start() {
  std::lock_guard lock(lifecycle);
  if (started) return Error{"https: the server was already started"};

  auto loaded = certs.load();
  if (!loaded) return Error{"https: " + loaded.error().message};
  certificateExpiry.set(static_cast<double>(certs.info().notAfterUnix));

  boost::system::error_code ec;
  auto address = net::ip::make_address(options().host, ec);
  if (ec) return Error{"https: host \"" + options().host + "\" is not an IP address"};
  tcp::endpoint endpoint(address, options().port);
  std::string where = (address.is_v6() ? "[" + options().host + "]" : options().host) + ":" +
                      std::to_string(options().port);

  int threadCount = std::max(1, options().threads);
  ioc.emplace(threadCount);
  acceptStrand.emplace(net::make_strand(*ioc));
  acceptor.emplace(*acceptStrand);
  auto fail = [&](const std::string& what) -> Result<void> {
    acceptor.reset();
    acceptStrand.reset();
    ioc.reset();
    return Error{"https: cannot " + what + " " + where + ": " + ec.message()};
  };
  if (acceptor->open(endpoint.protocol(), ec)) return fail("open a socket for");
  if (acceptor->set_option(net::socket_base::reuse_address(true), ec)) return fail("configure");
#ifdef SO_REUSEPORT
  if (options().reusePort && acceptor->set_option(reuse_port(true), ec)) {
    return fail("set SO_REUSEPORT on");
  }
#endif
  if (address.is_v6() && address.is_unspecified()) {
    acceptor->set_option(net::ip::v6_only(false), ec);  // best effort: "::" means both
  }
  if (acceptor->bind(endpoint, ec)) return fail("bind");
  if (acceptor->listen(net::socket_base::max_listen_connections, ec)) return fail("listen on");
  port = acceptor->local_endpoint().port();

  work.emplace(ioc->get_executor());
  acceptRetry.emplace(*acceptStrand);
  certTimer.emplace(*ioc);
  listening = true;  // no thread runs yet: the strand's state is still ours
  accept();
  scheduleCertificateCheck();
  for (int i = 0; i < threadCount; ++i) threads.emplace_back([this] { runLoop(); });
  started = true;
  kLog.info(
      "listening on {}:{} ({} threads, max body {} bytes, read timeout {}s, idle timeout "
      "{}s, max connections {})",
      options().host, port.load(), threadCount, options().maxBodyBytes,
      options().readTimeout.count(), options().idleTimeout.count(), options().maxConnections);
  return {};
}

void HttpsServer::Impl::stop() {
  std::lock_guard lock(lifecycle);
  if (!started || stopped) return;
  stopped = true;
  ioc->stop();
  for (auto& t : threads) t.join();
  threads.clear();
  boost::system::error_code ignored;
  acceptor->close(ignored);
  certTimer.reset();
  acceptRetry.reset();
  acceptor.reset();
  acceptStrand.reset();
  work.reset();
  ioc.reset();
  kLog.info("stopped on port {}", port.load());
}

bool HttpsServer::Impl::shutdown(std::chrono::milliseconds timeout) {
  auto began = std::chrono::steady_clock::now();
  {
    std::lock_guard lock(lifecycle);
    if (!started || stopped) return true;
  }
  state->beginDrain();
  // Shared: when every thread is held by a slow handler this may run after
  // the timeout, and so after this function has returned.
  auto closed = std::make_shared<std::promise<void>>();
  net::post(*acceptStrand, [this, closed] {
    closeListener();
    closed->set_value();
  });
  if (closed->get_future().wait_until(began + timeout) != std::future_status::ready) {
    kLog.warn("no thread free to close the listener within {} ms, stopping", timeout.count());
    stop();
    return false;
  }
  std::size_t open = state->openConnections();
  kLog.info(
      "draining: stopped listening on port {}; {} connections open, waiting up to {} ms",
      port.load(), open, timeout.count());
  state->drainConnections();
  bool drained = state->waitForNoConnections(began + timeout);
  auto took = std::chrono::duration_cast<std::chrono::milliseconds>(
      std::chrono::steady_clock::now() - began);
  if (drained) {
    kLog.info("drained in {} ms", took.count());
  } else {
    kLog.warn("{} connections still open after {} ms, closing them", state->openConnections(), took.count());
  }
  stop();
  return drained;
}

// On the accept strand. The kernel completes handshakes for a listening socket
// on its own; connections still in the accept queue when it closes are reset.
// Taking them first leaves a window of microseconds instead of the queue.
// (Where two processes share the port with SO_REUSEPORT, a connection hashed
// to this socket inside that window is still reset: Linux migrates them to the
// other socket only with net.ipv4.tcp_migrate_req=1.)
void HttpsServer::Impl::closeListener() {
  if (!listening) return;
  listening = false;
  state->beginClose();
  boost::system::error_code ec;
  acceptor->non_blocking(true, ec);
  while (!ec) {
    tcp::socket socket(net::make_strand(*ioc));
    acceptor->accept(socket, ec);
    if (!ec) admit(std::move(socket));
  }
  acceptor->close(ec);
  acceptRetry->cancel();
}

void HttpsServer::Impl::runLoop() {
  for (;;) {
    try {
      ioc->run();
      return;
    } catch (const std::exception& e) {
      // Handlers' exceptions are caught in the session; this is a last guard so
      // one bad connection cannot take a thread away.
      kLog.error("event loop: {}", e.what());
    }
  }
}

// One accept at a time, so the accept chain needs no strand; each connection
// gets a strand of its own.
void HttpsServer::Impl::accept() {
  acceptor->async_accept(net::make_strand(*ioc),
                         [this](const boost::system::error_code& ec, tcp::socket socket) {
                           onAccept(ec, std::move(socket));
                         });
}

void HttpsServer::Impl::onAccept(const boost::system::error_code& ec, tcp::socket socket) {
  if (!listening) {  // closed by closeListener(): whatever this accept got is still served
    if (!ec) admit(std::move(socket));
    return;
  }
  if (ec == net::error::operation_aborted) return;
  if (ec) {
    // Out of file descriptors, usually; retrying at once would spin.
    kLog.warn("accept failed: {}", ec.message());
    acceptRetry->expires_after(kAcceptRetryDelay);
    acceptRetry->async_wait([this](const boost::system::error_code& waitEc) {
      if (!waitEc && listening) accept();
    });
    return;
  }
  admit(std::move(socket));
  accept();
}

void HttpsServer::Impl::admit(tcp::socket socket) {
  if (state->admitConnection()) {
    // Responses are written whole; Nagle would hold back their last segment
    // (and the close_notify) for the client's delayed ACK.
    boost::system::error_code ignored;
    socket.set_option(tcp::no_delay(true), ignored);
    startSession(std::move(socket), certs.current(), state);
  } else {
    boost::system::error_code ignored;
    socket.close(ignored);
  }
}

void HttpsServer::Impl::scheduleCertificateCheck() {
  certTimer->expires_after(options().certCheckInterval);
  certTimer->async_wait([this](const boost::system::error_code& ec) {
    if (ec) return;
    switch (certs.poll()) {
      case CertificateReloader::PollResult::reloaded:
        reloadsTotal.inc();
        certificateExpiry.set(static_cast<double>(certs.info().notAfterUnix));
        break;
      case CertificateReloader::PollResult::failed:
        reloadErrorsTotal.inc();
        break;
      case CertificateReloader::PollResult::unchanged:
        break;
    }
    scheduleCertificateCheck();
  });
}

HttpsServer::HttpsServer(ServerOptions options, std::shared_ptr<metrics::Registry> metrics)
    : impl_(std::make_unique<Impl>(std::move(options), std::move(metrics))) {}

HttpsServer::~HttpsServer() = default;

void HttpsServer::route(std::string method, std::string path, Handler handler) {
  std::lock_guard lock(impl_->lifecycle);
  if (impl_->started) {
    kLog.error({{"method", method}, {"path", path}}, "route registered after start(), ignored");
    return;
  }
  impl_->state->addRoute(std::move(method), std::move(path), std::move(handler));
}

Result<void> HttpsServer::start() { return impl_->start(); }

void HttpsServer::stop() { impl_->stop(); }

void HttpsServer::beginDrain() { impl_->state->beginDrain(); }

bool HttpsServer::shutdown(std::chrono::milliseconds timeout) { return impl_->shutdown(timeout); }

std::uint16_t HttpsServer::boundPort() const { return impl_->port.load(); }

std::uint64_t HttpsServer::certReloads() const { return impl_->certs.reloads(); }

void routeProbes(HttpsServer& https, std::shared_ptr<metrics::Registry> registry,
                 std::function<std::optional<std::string>()> notReady) {
  https.route("GET", "/healthz", [](const Request&) { return Response{200, "text/plain; charset=utf-8", "ok\n"}; });
  https.route("GET", "/readyz", [notReady = std::move(notReady)](const Request&) {
    if (auto why = notReady()) return Response{503, "text/plain; charset=utf-8", *why + "\n"};
    return Response{200, "text/plain; charset=utf-8", "ok\n"};
  });
  https.route("GET", "/metrics", [registry = std::move(registry)](const Request&) {
    metrics::updateProcessMetrics(*registry);
    return Response{200, "text/plain; version=0.0.4; charset=utf-8", registry->render()};
  });
}

}  // namespace podshaper::server
