#include "webhook/serve.h"

#include <spdlog/spdlog.h>

#include <csignal>
#include <chrono>
#include <iostream>
#include <memory>

#include "cli/flags.h"
#include "core/admission.h"
#include "core/quantity.h"
#include "kube/client.h"
#include "kube/config.h"
#include "server/https_server.h"
#include "server/metrics.h"
#include "webhook/cluster_cache.h"
#include "webhook/config_file.h"

namespace podshaper::webhook {
namespace {

int fail(const std::string& message) {
  std::cerr << "podshaper-webhook serve: " << message << "\n";
  return 2;
}

}  // namespace

int runServe(int argc, char** argv) {
  auto flags = cli::Flags::parse(argc, argv, 2,
                                 {"listen", "tls-cert", "tls-key", "config", "kubeconfig", "threads"},
                                 {"in-cluster"});
  if (!flags) return fail(flags.error().message);
  if (auto ok = flags->require({"listen", "tls-cert", "tls-key"}); !ok) return fail(ok.error().message);
  auto listen = cli::parseListen(*flags->get("listen"));
  if (!listen) return fail(listen.error().message);
  auto config = loadConfig(flags->get("config"));
  if (!config) return fail(config.error().message);
  auto threads = parseCount(flags->get("threads", "2"));
  if (!threads || *threads == 0 || *threads > 64) return fail("--threads must be 1..64");

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

  auto metrics = std::make_shared<server::Metrics>();
  auto reviews = [&](const char* result) -> server::Counter& {
    return metrics->counter("podshaper_admission_reviews_total",
                            "AdmissionReviews answered, by result (mutated, allowed, denied, bad_request).",
                            {{"result", result}});
  };
  server::Counter& mutated = reviews("mutated");
  server::Counter& allowed = reviews("allowed");
  server::Counter& denied = reviews("denied");
  server::Counter& badRequest = reviews("bad_request");
  server::Histogram& latency = metrics->histogram(
      "podshaper_admission_duration_seconds", "Time to decide one AdmissionReview, decode to encode.",
      {0.00005, 0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.1});

  server::ServerOptions options;
  options.host = listen->host;
  options.port = listen->port;
  options.certFile = *flags->get("tls-cert");
  options.keyFile = *flags->get("tls-key");
  options.threads = static_cast<int>(*threads);
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
  https.route("GET", "/readyz", [cachePtr](const server::Request&) {
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

  int signal = 0;
  sigwait(&signals, &signal);
  spdlog::info("podshaper-webhook: signal {}, shutting down", signal);
  https.stop();
  if (cache) cache->stop();
  return 0;
}

}  // namespace podshaper::webhook
