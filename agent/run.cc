#include "agent/run.h"

#include <spdlog/spdlog.h>

#include <atomic>
#include <chrono>
#include <csignal>
#include <ctime>
#include <filesystem>
#include <iostream>

#include "agent/backend.h"
#include "agent/memlock_probe.h"
#include "api/names.h"
#include "api/report.h"
#include "base/json_util.h"
#include "base/quantity.h"
#include "cli/flags.h"
#include "cli/logging.h"
#include "cli/signals.h"
#include "kube/client.h"
#include "kube/config.h"
#include "kube/protocol.h"
#include "metrics/metrics.h"
#include "metrics/process.h"
#include "server/https_server.h"
#include "server/own_certificate.h"

namespace podshaper::agent {
namespace {
const cli::Logger& kMemlock = cli::logger("memlock-probe");
const cli::Logger& kReport = cli::logger("report");

// Where the agent hears from its pod's memlock-probe container (--memlock-probe-*).
struct MemlockProbeSource {
  std::string file;                 // what the probe writes once it runs
  std::string podNamespace, podName;  // empty: the pod is not read
  MemlockLimit requested;
};

// The probe's file when it is there; else, when asked for (the API server is
// not asked every second), its container's status in the pod. When the pod
// cannot be read, what was known before (a failing API server must not make a
// node's verdict come and go).
MemlockProbeStatus observeMemlockProbe(const kube::Client& client, const MemlockProbeSource& source, bool readPod,
                                       const MemlockProbeStatus& before) {
  MemlockProbeStatus status;
  std::error_code ec;
  if (std::filesystem::exists(source.file, ec)) {
    auto text = cli::readFile(source.file);
    auto limit = text ? parseMemlockRlimit(*text) : Result<MemlockRlimit>(text.error());
    if (limit) {
      status.state = MemlockProbeStatus::State::kGranted;
      status.memlockBytes = limit->soft;
      return status;
    }
    kMemlock.warn({{"file", source.file}}, "its file: {}", limit.error().message);
  }
  if (!readPod || source.podName.empty()) return status;
  auto pod = client.get(kube::resourcePath("v1", "pods", source.podNamespace, source.podName));
  if (!pod) {
    kMemlock.warn({{"pod", source.podNamespace + "/" + source.podName}}, "its Pod: {}", pod.error().message);
    return before;
  }
  return memlockProbeFromPod(*pod);
}

std::string nowRfc3339() {
  std::time_t t = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

int fail(const std::string& message) {
  std::cerr << "podshaper-agent run: " << message << "\n";
  return 2;
}

// One probe and, when needed, one write (writeReport). A steady node causes a write only
// when the heartbeat is due.
Result<std::string> reconcile(const kube::Client& client, Backend& backend, const std::string& node,
                              long long heartbeatSeconds, const MemlockProbeSource* source,
                              const MemlockProbeStatus& memlock) {
  auto topology = backend.probe();
  if (!topology) return makeError("probe: " + topology.error().message);
  if (source != nullptr) applyMemlockProbe(topology->host, memlock, source->requested);
  return writeReport(client, node, reportSpec(*topology, nowRfc3339()), std::time(nullptr), heartbeatSeconds);
}

struct MemlockProbeFlags {
  std::optional<MemlockProbeSource> source;  // unset without --memlock-probe-file
  unsigned long long waitSeconds = 30;       // for its first word before the first report
};

// Where the agent hears from its memlock-probe: --memlock-probe-file and the flags that go with it.
Result<MemlockProbeFlags> memlockProbeFlags(const cli::Flags& flags) {
  for (const char* needsFile : {"memlock-probe-pod", "memlock-requested", "memlock-probe-wait"}) {
    if (flags.has(needsFile) && !flags.has("memlock-probe-file")) {
      return makeError(std::string("--") + needsFile + " needs --memlock-probe-file (where the memlock-probe writes)");
    }
  }
  MemlockProbeFlags out;
  auto wait = parseCount(flags.get("memlock-probe-wait", "30"));
  if (!wait) return makeError("--memlock-probe-wait takes whole seconds");
  out.waitSeconds = *wait;
  if (!flags.has("memlock-probe-file")) return out;
  MemlockProbeSource& source = out.source.emplace();
  source.file = *flags.get("memlock-probe-file");
  auto requested = parseMemlockLimit(flags.get("memlock-requested", "unlimited"));
  if (!requested) return makeError("--memlock-requested: " + requested.error().message);
  source.requested = *requested;
  if (auto pod = flags.get("memlock-probe-pod")) {
    auto slash = pod->find('/');
    if (slash == std::string::npos || slash == 0 || slash + 1 == pod->size() ||
        pod->find('/', slash + 1) != std::string::npos) {
      return makeError("--memlock-probe-pod \"" + *pod + "\": expected NAMESPACE/NAME");
    }
    source.podNamespace = pod->substr(0, slash);
    source.podName = pod->substr(slash + 1);
  }
  return out;
}

// --listen: /healthz, /readyz (once a probe has reached the API server) and /metrics over
// TLS with a self-signed certificate (podshaper_agent_probes_total{result},
// podshaper_agent_probe_duration_seconds, the API client's, the process's).
class Serving {
 public:
  static Result<std::unique_ptr<Serving>> start(const std::string& listen) {
    auto at = cli::parseListen(listen);
    if (!at) return at.error();
    auto cert = server::OwnCertificate::make("podshaper-agent");
    if (!cert) return cert.error();
    std::unique_ptr<Serving> s(new Serving);
    s->cert_ = std::move(*cert);
    metrics::registerBuildInfo(*s->registry_, "agent", PODSHAPER_VERSION);
    for (const char* result : {"created", "updated", "heartbeat", "unchanged", "error"}) s->count(result);
    server::ServerOptions options;
    options.host = at->host;
    options.port = at->port;
    options.certFile = s->cert_->certFile();
    options.keyFile = s->cert_->keyFile();
    options.threads = 1;
    s->https_ = std::make_unique<server::HttpsServer>(options, s->registry_);
    server::routeProbes(*s->https_, s->registry_, [ready = &s->ready_]() -> std::optional<std::string> {
      if (!ready->load()) return "no probe has reached the API server yet";
      return std::nullopt;
    });
    if (auto started = s->https_->start(); !started) return started.error();
    spdlog::info("podshaper-agent: serving /metrics and probes on {}:{}", at->host, s->https_->boundPort());
    return s;
  }
  ~Serving() {
    if (https_) https_->stop();
  }
  metrics::Registry* registry() { return registry_.get(); }
  // One probe-and-report round: its outcome ("created", …, or "error") and duration.
  void probed(const std::string& result, std::chrono::steady_clock::duration took) {
    count(result).inc();
    duration_.observe(std::chrono::duration<double>(took).count());
    if (result == "error") return;
    ready_.store(true);
    lastReport_.set(static_cast<double>(std::time(nullptr)));
  }

 private:
  Serving()
      : registry_(std::make_shared<metrics::Registry>()),
        duration_(registry_->histogram("podshaper_agent_probe_duration_seconds",
                                       "One round: the node probed with NVML and CUDA, its report read and written.",
                                       {0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60})),
        lastReport_(registry_->gauge("podshaper_agent_last_report_timestamp_seconds",
                                     "When a round last reached the API server (the report written or found "
                                     "current), in seconds since the epoch.")) {}
  metrics::Counter& count(const std::string& result) {
    return registry_->counter("podshaper_agent_probes_total",
                              "Probe-and-report rounds, by result: created, updated, heartbeat, unchanged "
                              "(the report was written so, or not at all), error.",
                              {{"result", result}});
  }
  std::shared_ptr<metrics::Registry> registry_;
  metrics::Histogram& duration_;
  metrics::Gauge& lastReport_;
  std::unique_ptr<server::OwnCertificate> cert_;
  std::unique_ptr<server::HttpsServer> https_;
  std::atomic<bool> ready_{false};
};

}  // namespace

Result<std::string> writeReport(const kube::Client& client, const std::string& node, const nlohmann::json& spec,
                                long long now, long long heartbeatSeconds) {
  const std::string path = kube::resourcePath(names::kGroupVersion, names::kReportResource, "", node);
  auto existing = client.get(path);
  if (!existing && !existing.error().isNotFound()) return makeError("get: " + existing.error().message);
  const ReportWrite write =
      planReportWrite(existing ? std::optional<nlohmann::json>(*existing) : std::nullopt, spec, now, heartbeatSeconds);
  switch (write.kind) {
    case ReportWrite::Kind::kCreate: {
      auto nodeObject = client.get(kube::resourcePath("v1", "nodes", "", node));
      if (!nodeObject) return makeError("Node " + node + ": " + nodeObject.error().message);
      auto created = client.create(kube::resourcePath(names::kGroupVersion, names::kReportResource),
                                   newReport(node, stringMember(member(*nodeObject, "metadata"), "uid"), spec));
      if (!created) return makeError("create: " + created.error().message);
      break;
    }
    case ReportWrite::Kind::kUpdate:
    case ReportWrite::Kind::kHeartbeat: {
      auto replaced = client.replace(path, write.replacement);
      if (!replaced) return makeError("update: " + replaced.error().message);
      break;
    }
    case ReportWrite::Kind::kUnchanged:
      break;
  }
  return std::string(reportWriteWord(write.kind));
}

int runReporter(int argc, char** argv) {
  auto flags = cli::Flags::parse(argc, argv, 2,
                                 {"node", "fixture", "p2p-fixture", "recording", "kubeconfig", "interval", "heartbeat",
                                  "memlock-probe-file", "memlock-probe-pod", "memlock-requested", "memlock-probe-wait",
                                  "listen"},
                                 {"once"});
  if (!flags) return fail(flags.error().message);
  if (auto ok = flags->require({"node"}); !ok) return fail(ok.error().message);
  auto backend = backendFromFlags(*flags);
  if (!backend) return fail(backend.error().message);
  auto interval = parseCount(flags->get("interval", "60"));
  auto heartbeat = parseCount(flags->get("heartbeat", "300"));
  if (!interval || *interval == 0 || !heartbeat) return fail("--interval and --heartbeat take whole seconds");
  auto probeFlags = memlockProbeFlags(*flags);
  if (!probeFlags) return fail(probeFlags.error().message);
  const std::optional<MemlockProbeSource>& source = probeFlags->source;
  const unsigned long long probeWait = probeFlags->waitSeconds;
  auto config = flags->has("kubeconfig") ? kube::loadKubeconfig(*flags->get("kubeconfig")) : kube::inClusterConfig();
  if (!config) return fail(config.error().message);

  const sigset_t signals = cli::blockStopSignals();

  std::unique_ptr<Serving> serving;
  if (auto listen = flags->get("listen")) {
    auto started = Serving::start(*listen);
    if (!started) return fail("--listen: " + started.error().message);
    serving = std::move(*started);
  }
  kube::Client client(*config, kube::ClientOptions{.metrics = serving ? serving->registry() : nullptr});
  const std::string node = *flags->get("node");
  // Sleeps; false when a signal came instead.
  auto sleep = [&](unsigned long long seconds) {
    timespec wait{static_cast<time_t>(seconds), 0};
    if (sigtimedwait(&signals, nullptr, &wait) <= 0) return true;
    spdlog::info("podshaper-agent: signal received, stopping");
    return false;
  };
  using State = MemlockProbeStatus::State;
  MemlockProbeStatus memlock;
  if (source) {
    // The probe starts beside the agent: give it a while to write, or to fail,
    // before the first report (the file each second, the pod every 5 s).
    memlock = observeMemlockProbe(client, *source, true, memlock);
    for (unsigned long long waited = 0; memlock.state == State::kWaiting && waited < probeWait; ++waited) {
      if (!sleep(1)) return 0;
      memlock = observeMemlockProbe(client, *source, (waited + 1) % 5 == 0, memlock);
    }
    if (memlock.state == State::kWaiting) {
      kMemlock.info("the memlock-probe has neither written {} nor failed within {} s: reporting without it",
                    source->file, probeWait);
    }
  }
  while (true) {
    const auto start = std::chrono::steady_clock::now();
    auto result = reconcile(client, **backend, node, static_cast<long long>(*heartbeat), source ? &*source : nullptr,
                            memlock);
    if (serving) serving->probed(result ? *result : "error", std::chrono::steady_clock::now() - start);
    if (result) {
      kReport.info({{"report", node}}, "{}", *result);
    } else {
      kReport.warn({{"report", node}}, "{}", result.error().message);
    }
    if (flags->has("once")) return result ? 0 : 1;
    if (!source || memlock.state != State::kWaiting) {
      if (!sleep(*interval)) return 0;
    } else {
      // Not heard from the memlock-probe yet: its file is looked at every
      // second until the next probe, and a report written as soon as it comes.
      for (unsigned long long waited = 0; waited < *interval; ++waited) {
        if (!sleep(1)) return 0;
        if (observeMemlockProbe(client, *source, false, memlock).state != State::kWaiting) break;
      }
    }
    if (source) memlock = observeMemlockProbe(client, *source, true, memlock);
  }
}

}  // namespace podshaper::agent
