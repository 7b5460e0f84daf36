#include "webhook/serve.h"

#include <spdlog/spdlog.h>

#include <atomic>
#include <csignal>
#include <chrono>
#include <ctime>
#include <iostream>
#include <memory>
#include <optional>

#include "cli/flags.h"
#include "shaping/admission.h"
#include "base/quantity.h"
#include "base/timefmt.h"
#include "kube/client.h"
#include "kube/config.h"
#include "server/https_server.h"
#include "metrics/metrics.h"
#include "webhook/cluster_cache.h"
#include "webhook/config_file.h"

namespace podshaper::webhook {
namespace {

int fail(const std::string& message) {
  std::cerr << "podshaper-webhook serve: " << message << "\n";
  return 2;
}

// A duration flag ("10s", "1m", "0s"): whole seconds within [min, max].
Result<std::chrono::seconds> durationFlag(const cli::Flags& flags, const std::string& name,
                                          const std::string& fallback, long long min,
                                          long long max) {
  std::string text = flags.get(name, fallback);
  std::optional<long long> seconds = parseDurationSeconds(text);
  if (!seconds || *seconds < min || *seconds > max) {
    return Error{"--" + name + " must be a duration from " + std::to_string(min) + "s to " +
                 std::to_string(max) + "s such as \"" + fallback + "\", not \"" + text + "\""};
  }
  return std::chrono::seconds(*seconds);
}

// Waits up to `limit` for one of `signals`; true when one came.
bool waitForSignal(const sigset_t& signals, std::chrono::seconds limit) {
  auto deadline = std::chrono::steady_clock::now() + limit;
  for (;;) {
    auto left = deadline - std::chrono::steady_clock::now();
    if (left <= std::chrono::steady_clock::duration::zero()) return false;
    auto ns = std::chrono::duration_cast<std::chrono::nanoseconds>(left).count();
    timespec wait{static_cast<time_t>(ns / 1'000'000'000), static_cast<long>(ns % 1'000'000'000)};
    if (sigtimedwait(&signals, nullptr, &wait) > 0) return true;
    // EAGAIN: the time is up (checked above); EINTR: another signal, wait on.
  }
}

}  // namespace

int runServe(int argc, char** argv) {
  auto flags = cli::Flags::parse(argc, argv, 2,
                                 {"listen", "tls-cert", "tls-key", "config", "kubeconfig",
                                  "threads", "read-timeout", "idle-timeout", "shutdown-delay",
                                  "drain-timeout"},
                                 {"in-cluster"});
  if (!flags) return fail(flags.error().message);
  if (auto ok = flags->require({"listen", "tls-cert", "tls-key"}); !ok) return fail(ok.error().message);
  auto listen = cli::parseListen(*flags->get("listen"));
  if (!listen) return fail(listen.error().message);
  auto config = loadConfig(flags->get("config"));
  if (!config) return fail(config.error().message);
  auto threads = parseCount(flags->get("threads", "2"));
  if (!threads || *threads == 0 || *threads > 64) return fail("--threads must be 1..64");
  auto readTimeout = durationFlag(*flags, "read-timeout", "10s", 1, 3600);
  if (!readTimeout) return fail(readTimeout.error().message);
  auto idleTimeout = durationFlag(*flags, "idle-timeout", "60s", 1, 3600);
  if (!idleTimeout) return fail(idleTimeout.error().message);
  auto shutdownDelay = durationFlag(*flags, "shutdown-delay", "0s", 0, 3600);
  if (!shutdownDelay) return fail(shutdownDelay.error().message);
  auto drainTimeout = durationFlag(*flags, "drain-timeout", "10s", 1, 3600);
  if (!drainTimeout) return fail(drainTimeout.error().message);

  // Signals are taken by sigwait below; block them before any thread starts.
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGINT);
  sigaddset(&signals, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);

  std::unique_ptr<kube::Client> client;
  std::unique_ptr<ClusterCache> cache;
  if (flags->has("kubeconfig") || flags->has("in-cluster")) {
    auto clientConfig = flags->has("kubeconfig") ? kube::loadKubeconfig(*flags->get("kubeconfig"))
                                                 : kube::inClusterConfig();
    if (!clientConfig) return fail(clientConfig.error().message);
    client = std::make_unique<kube::Client>(*clientConfig);
    cache = std::make_unique<ClusterCache>(*client);
    cache->start();
  }

  auto metrics = std::make_shared<metrics::Registry>();
  auto reviews = [&](const char* result) -> metrics::Counter& {
    return metrics->counter("podshaper_admission_reviews_total",
                            "AdmissionReviews answered, by result (mutated, allowed, denied, bad_request).",
                            {{"result", result}});
  };
  metrics::Counter& mutated = reviews("mutated");
  metrics::Counter& allowed = reviews("allowed");
  metrics::Counter& denied = reviews("denied");
  metrics::Counter& badRequest = reviews("bad_request");
  metrics::Histogram& latency = metrics->histogram(
      "podshaper_admission_duration_seconds", "Time to decide one AdmissionReview, decode to encode.",
      {0.00005, 0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.1});

  server::ServerOptions options;
  options.host = listen->host;
  options.port = listen->port;
  options.certFile = *flags->get("tls-cert");
  options.keyFile = *flags->get("tls-key");
  options.threads = static_cast<int>(*threads);
  options.readTimeout = *readTimeout;
  options.idleTimeout = *idleTimeout;
  std::atomic<bool> shuttingDown{false};  // before https: its handlers read it
  server::HttpsServer https(options, metrics);
  const Config cfg = *config;
  ClusterCache* cachePtr = cache.get();

  https.route("POST", "/mutate-v1-pod", [&, cfg, cachePtr](const server::Request& req) {
    auto start = std::chrono::steady_clock::now();
    std::shared_ptr<const ClusterView> view = cachePtr ? cachePtr->view() : nullptr;
    auto decision = admit(req.body, cfg, view.get(), kShaperVersion);
    latency.observe(std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
    if (!decision) {
      badRequest.inc();
      spdlog::warn("admission: bad request: {}", decision.error().message);
      return server::Response{400, "text/plain; charset=utf-8", decision.error().message + "\n"};
    }
    if (!decision->allowed) {
      denied.inc();
      spdlog::info("admission: denied uid={}: {}", decision->review["response"]["uid"].get<std::string>(),
                   decision->review["response"]["status"]["message"].get<std::string>());
    } else {
      (decision->mutated ? mutated : allowed).inc();
    }
    return server::Response{200, "application/json", decision->review.dump()};
  });
  https.route("GET", "/healthz", [](const server::Request&) { return server::Response{200, "text/plain; charset=utf-8", "ok\n"}; });
  https.route("GET", "/readyz", [cachePtr, &shuttingDown](const server::Request&) {
    if (shuttingDown.load(std::memory_order_relaxed)) {
      return server::Response{503, "text/plain; charset=utf-8", "shutting down\n"};
    }
    if (cachePtr != nullptr && !cachePtr->synced()) {
      return server::Response{503, "text/plain; charset=utf-8", "cluster cache not synced\n"};
    }
    return server::Response{200, "text/plain; charset=utf-8", "ok\n"};
  });
  https.route("GET", "/metrics", [metrics](const server::Request&) {
    return server::Response{200, "text/plain; version=0.0.4; charset=utf-8", metrics->render()};
  });

  if (auto started = https.start(); !started) return fail(started.error().message);
  spdlog::info("podshaper-webhook {} serving on {}:{} (config {}, cluster {})", PODSHAPER_VERSION,
               listen->host, https.boundPort(), cfg.hash(),
               cache ? "watched" : "not watched: deciding from annotations and config");

  // Graceful shutdown. Kubernetes sends SIGTERM while the endpoint is being
  // removed, and kube-proxies and the API server notice only a little later:
  // not ready at once, keep serving for --shutdown-delay (each answer saying
  // Connection: close, so the API server's kept-alive connections move to the
  // other replica), then stop listening and finish what is in flight, for at
  // most --drain-timeout. A second signal ends the delay early.
  int signal = 0;
  sigwait(&signals, &signal);
  shuttingDown.store(true, std::memory_order_relaxed);
  https.beginDrain();
  spdlog::info("podshaper-webhook: signal {}, shutting down: not ready, serving for {}s more, then "
               "draining for at most {}s",
               signal, shutdownDelay->count(), drainTimeout->count());
  if (shutdownDelay->count() > 0 && waitForSignal(signals, *shutdownDelay)) {
    spdlog::info("podshaper-webhook: second signal, draining now");
  }
  bool drained = https.shutdown(*drainTimeout);
  if (cache) cache->stop();
  spdlog::info("podshaper-webhook: stopped{}",
               drained ? "" : " (connections cut at --drain-timeout)");
  return 0;
}

}  // namespace podshaper::webhook
