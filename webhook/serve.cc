#include "webhook/serve.h"

#include <spdlog/spdlog.h>

#include <atomic>
#include <csignal>
#include <chrono>
#include <ctime>
#include <iostream>
#include <map>
#include <memory>
#include <optional>

#include "base/quantity.h"
#include "base/timefmt.h"
#include "cli/flags.h"
#include "cli/logging.h"
#include "cli/signals.h"
#include "kube/client.h"
#include "kube/config.h"
#include "metrics/metrics.h"
#include "metrics/process.h"
#include "server/https_server.h"
#include "shaping/admission.h"
#include "shaping/pod_shaper.h"
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

struct ServeOptions {
  cli::Listen listen;
  std::string certFile, keyFile;
  Config config;
  int threads = 2;
  std::chrono::seconds readTimeout{}, idleTimeout{}, shutdownDelay{}, drainTimeout{};
  std::optional<std::string> kubeconfig;
  bool inCluster = false;
};

Result<ServeOptions> parseServeFlags(int argc, char** argv) {
  auto flags = cli::Flags::parse(argc, argv, 2,
                                 {"listen", "tls-cert", "tls-key", "config", "kubeconfig", "threads", "read-timeout",
                                  "idle-timeout", "shutdown-delay", "drain-timeout"},
                                 {"in-cluster"});
  if (!flags) return flags.error();
  if (auto ok = flags->require({"listen", "tls-cert", "tls-key"}); !ok) return ok.error();
  ServeOptions o;
  auto listen = cli::parseListen(*flags->get("listen"));
  if (!listen) return listen.error();
  o.listen = *listen;
  o.certFile = *flags->get("tls-cert");
  o.keyFile = *flags->get("tls-key");
  auto config = loadConfig(flags->get("config"));
  if (!config) return config.error();
  o.config = *config;
  auto threads = parseCount(flags->get("threads", "2"));
  if (!threads || *threads == 0 || *threads > 64) return makeError("--threads must be 1..64");
  o.threads = static_cast<int>(*threads);
  struct Duration {
    const char* name;
    const char* fallback;
    long long min;
    std::chrono::seconds* into;
  };
  for (const Duration& d : {Duration{"read-timeout", "10s", 1, &o.readTimeout},
                            Duration{"idle-timeout", "60s", 1, &o.idleTimeout},
                            Duration{"shutdown-delay", "0s", 0, &o.shutdownDelay},
                            Duration{"drain-timeout", "10s", 1, &o.drainTimeout}}) {
    auto value = durationFlag(*flags, d.name, d.fallback, d.min, 3600);
    if (!value) return value.error();
    *d.into = *value;
  }
  o.kubeconfig = flags->get("kubeconfig");
  o.inCluster = flags->has("in-cluster");
  return o;
}

// POST /mutate-v1-pod: one AdmissionReview, decided from the cluster view when the
// cluster is watched, counted and timed.
void routeAdmission(server::HttpsServer& https, metrics::Registry& registry, const Config& cfg,
                    const ClusterCache* cache) {
  auto reviews = [&](const char* result) -> metrics::Counter& {
    return registry.counter("podshaper_admission_reviews_total",
                            "AdmissionReviews answered, by result (mutated, allowed, denied, bad_request).",
                            {{"result", result}});
  };
  // The handler outlives this function: it holds the registry's series by pointer.
  struct Series {
    metrics::Counter *mutated, *allowed, *denied, *badRequest;
    metrics::Histogram* latency;
    std::map<DenialCause, metrics::Counter*> denials;  // by cause, every one from 0
  };
  Series m{&reviews("mutated"), &reviews("allowed"), &reviews("denied"), &reviews("bad_request"),
           &registry.histogram("podshaper_admission_duration_seconds",
                               "Time to decide one AdmissionReview, decode to encode.",
                               {0.00005, 0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.1}),
           {}};
  for (DenialCause cause : kDenialCauses) {
    m.denials[cause] = &registry.counter("podshaper_admission_denials_total",
                                         "Pods denied, by cause: the step of shaping that refused them "
                                         "(docs/webhook.md \"Metrics\").",
                                         {{"cause", std::string(toString(cause))}});
  }
  https.route("POST", "/mutate-v1-pod", [m, cfg, cache](const server::Request& req) {
    // Each server thread answers one review at a time, and keeps what the next one reuses.
    thread_local AdmissionScratch scratch;
    auto start = std::chrono::steady_clock::now();
    std::shared_ptr<const ClusterView> view = cache ? cache->view() : nullptr;
    const int64_t now = std::chrono::duration_cast<std::chrono::seconds>(
                            std::chrono::system_clock::now().time_since_epoch()).count();
    auto decision = admit(scratch, req.body, cfg, view.get(), kShaperVersion, cache ? cache->claims() : ClaimLookup(),
                          cache ? cache->shmProfiles() : ShmProfileLookup(), now);
    m.latency->observe(std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
    if (!decision) {
      m.badRequest->inc();
      cli::logger("admission").warn("bad request: {}", decision.error().message);
      return server::Response{400, "text/plain; charset=utf-8", decision.error().message + "\n"};
    }
    cli::LogObject about(decision->object, decision->owner);
    const std::string owner = decision->owner.empty() ? "" : " (" + decision->owner + ")";
    if (!decision->allowed) {
      m.denied->inc();
      if (auto it = m.denials.find(decision->cause); it != m.denials.end()) it->second->inc();
      cli::logger("admission").info({{"uid", decision->review["response"]["uid"].get<std::string>()}}, "denied {}{}: {}",
                                    decision->object, owner,
                                    decision->review["response"]["status"]["message"].get<std::string>());
    } else {
      (decision->mutated ? m.mutated : m.allowed)->inc();
      if (!decision->object.empty()) {
        cli::logger("admission").debug("{} {}{}", decision->mutated ? "shaped" : "allowed as it is", decision->object, owner);
      }
    }
    return server::Response{200, "application/json", decision->body()};
  });
}

// Graceful shutdown. Kubernetes sends SIGTERM while the endpoint is being
// removed, and kube-proxies and the API server notice only a little later:
// not ready at once, keep serving for --shutdown-delay (each answer saying
// Connection: close, so the API server's kept-alive connections move to the
// other replica), then stop listening and finish what is in flight, for at
// most --drain-timeout. A second signal ends the delay early.
// True when everything in flight was answered.
bool serveUntilSignalled(server::HttpsServer& https, const sigset_t& signals, const ServeOptions& o,
                         std::atomic<bool>& shuttingDown) {
  const int signal = cli::waitForStopSignal(signals);
  shuttingDown.store(true, std::memory_order_relaxed);
  https.beginDrain();
  spdlog::info("podshaper-webhook: signal {}, shutting down: not ready, serving for {}s more, then "
               "draining for at most {}s",
               signal, o.shutdownDelay.count(), o.drainTimeout.count());
  if (o.shutdownDelay.count() > 0 && waitForSignal(signals, o.shutdownDelay)) {
    spdlog::info("podshaper-webhook: second signal, draining now");
  }
  return https.shutdown(o.drainTimeout);
}

}  // namespace

int runServe(int argc, char** argv) {
  auto parsed = parseServeFlags(argc, argv);
  if (!parsed) return fail(parsed.error().message);
  const ServeOptions& o = *parsed;

  // Signals are taken by sigwait below; block them before any thread starts.
  const sigset_t signals = cli::blockStopSignals();

  auto registry = std::make_shared<metrics::Registry>();
  metrics::registerBuildInfo(*registry, "webhook", PODSHAPER_VERSION);
  std::unique_ptr<kube::Client> client;
  std::unique_ptr<ClusterCache> cache;
  if (o.kubeconfig || o.inCluster) {
    auto clientConfig = o.kubeconfig ? kube::loadKubeconfig(*o.kubeconfig) : kube::inClusterConfig();
    if (!clientConfig) return fail(clientConfig.error().message);
    client = std::make_unique<kube::Client>(*clientConfig, kube::ClientOptions{.metrics = registry.get()});
    cache = std::make_unique<ClusterCache>(*client, registry.get());
    cache->start();
  }

  server::ServerOptions options;
  options.host = o.listen.host;
  options.port = o.listen.port;
  options.certFile = o.certFile;
  options.keyFile = o.keyFile;
  options.threads = o.threads;
  options.readTimeout = o.readTimeout;
  options.idleTimeout = o.idleTimeout;
  std::atomic<bool> shuttingDown{false};  // before https: its handlers read it
  server::HttpsServer https(options, registry);
  routeAdmission(https, *registry, o.config, cache.get());
  const ClusterCache* watched = cache.get();
  server::routeProbes(https, registry, [watched, &shuttingDown]() -> std::optional<std::string> {
    if (shuttingDown.load(std::memory_order_relaxed)) return "shutting down";
    if (watched != nullptr && !watched->synced()) return "cluster cache not synced";
    return std::nullopt;
  });

  if (auto started = https.start(); !started) return fail(started.error().message);
  spdlog::info("podshaper-webhook {} serving on {}:{} (config {}, cluster {})", PODSHAPER_VERSION, o.listen.host,
               https.boundPort(), o.config.hash(),
               cache ? "watched" : "not watched: deciding from annotations and config");
  const bool drained = serveUntilSignalled(https, signals, o, shuttingDown);
  if (cache) cache->stop();
  spdlog::info("podshaper-webhook: stopped{}", drained ? "" : " (connections cut at --drain-timeout)");
  return 0;
}

}  // namespace podshaper::webhook
