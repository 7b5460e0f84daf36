#include "server/https_server.h"

#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/ip/v6_only.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/strand.hpp>
#include <spdlog/spdlog.h>

#include <mutex>
#include <optional>
#include <thread>
#include <vector>

#include "server/http_session.h"
#include "server/tls_context.h"

namespace podshaper::server {

namespace net = boost::asio;
using tcp = net::ip::tcp;

namespace {
constexpr std::chrono::milliseconds kAcceptRetryDelay{100};
}  // namespace

struct HttpsServer::Impl {
  Impl(ServerOptions options, std::shared_ptr<Metrics> metrics)
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

  Result<bool> start();
  void stop();
  void accept();
  void onAccept(const boost::system::error_code& ec, tcp::socket socket);
  void scheduleCertificateCheck();
  void runLoop();

  const ServerOptions& options() const { return state->options(); }

  std::shared_ptr<ServerState> state;
  CertificateReloader certs;
  Counter& reloadsTotal;
  Counter& reloadErrorsTotal;
  Gauge& certificateExpiry;

  std::mutex lifecycle;  // start/stop/route
  bool started = false;
  bool stopped = false;
  std::atomic<std::uint16_t> port{0};
  // Built by start(), torn down by stop() in reverse order: everything that
  // uses the io_context goes before it, and destroying it destroys the
  // sessions still waiting on it, which closes their sockets.
  std::optional<net::io_context> ioc;
  std::optional<net::executor_work_guard<net::io_context::executor_type>> work;
  std::optional<tcp::acceptor> acceptor;
  std::optional<net::steady_timer> acceptRetry;
  std::optional<net::steady_timer> certTimer;
  std::vector<std::thread> threads;
};

Result<bool> HttpsServer::Impl::start() {
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
  acceptor.emplace(*ioc);
  auto fail = [&](const std::string& what) -> Result<bool> {
    acceptor.reset();
    ioc.reset();
    return Error{"https: cannot " + what + " " + where + ": " + ec.message()};
  };
  if (acceptor->open(endpoint.protocol(), ec)) return fail("open a socket for");
  if (acceptor->set_option(net::socket_base::reuse_address(true), ec)) return fail("configure");
  if (address.is_v6() && address.is_unspecified()) {
    acceptor->set_option(net::ip::v6_only(false), ec);  // best effort: "::" means both
  }
  if (acceptor->bind(endpoint, ec)) return fail("bind");
  if (acceptor->listen(net::socket_base::max_listen_connections, ec)) return fail("listen on");
  port = acceptor->local_endpoint().port();

  work.emplace(ioc->get_executor());
  acceptRetry.emplace(*ioc);
  certTimer.emplace(*ioc);
  accept();
  scheduleCertificateCheck();
  for (int i = 0; i < threadCount; ++i) threads.emplace_back([this] { runLoop(); });
  started = true;
  spdlog::info(
      "https: listening on {}:{} ({} threads, max body {} bytes, read timeout {}s, idle timeout "
      "{}s, max connections {})",
      options().host, port.load(), threadCount, options().maxBodyBytes,
      options().readTimeout.count(), options().idleTimeout.count(), options().maxConnections);
  return true;
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
  work.reset();
  ioc.reset();
  spdlog::info("https: stopped listening on port {}", port.load());
}

void HttpsServer::Impl::runLoop() {
  for (;;) {
    try {
      ioc->run();
      return;
    } catch (const std::exception& e) {
      // Handlers' exceptions are caught in the session; this is a last guard so
      // one bad connection cannot take a thread away.
      spdlog::error("https: event loop: {}", e.what());
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
  if (ec == net::error::operation_aborted) return;
  if (ec) {
    // Out of file descriptors, usually; retrying at once would spin.
    spdlog::warn("https: accept failed: {}", ec.message());
    acceptRetry->expires_after(kAcceptRetryDelay);
    acceptRetry->async_wait([this](const boost::system::error_code& waitEc) {
      if (!waitEc) accept();
    });
    return;
  }
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
  accept();
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

HttpsServer::HttpsServer(ServerOptions options, std::shared_ptr<Metrics> metrics)
    : impl_(std::make_unique<Impl>(std::move(options), std::move(metrics))) {}

HttpsServer::~HttpsServer() = default;

void HttpsServer::route(std::string method, std::string path, Handler handler) {
  std::lock_guard lock(impl_->lifecycle);
  if (impl_->started) {
    spdlog::error("https: route {} {} registered after start(), ignored", method, path);
    return;
  }
  impl_->state->addRoute(std::move(method), std::move(path), std::move(handler));
}

Result<bool> HttpsServer::start() { return impl_->start(); }

void HttpsServer::stop() { impl_->stop(); }

std::uint16_t HttpsServer::boundPort() const { return impl_->port.load(); }

std::uint64_t HttpsServer::certReloads() const { return impl_->certs.reloads(); }

}  // namespace podshaper::server
