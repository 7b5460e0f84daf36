#include "operator/run.h"

#include <spdlog/spdlog.h>
#include <unistd.h>

#include <csignal>
#include <cstdlib>
#include <filesystem>
#include <iostream>
#include <memory>

#include "cli/flags.h"
#include "cli/signals.h"
#include "kube/client.h"
#include "kube/config.h"
#include "kube/leader_elector.h"
#include "metrics/heap.h"
#include "metrics/metrics.h"
#include "metrics/process.h"
#include "operator/config.h"
#include "operator/controller.h"
#include "operator/webhook_certs.h"
#include "server/https_server.h"
#include "server/own_certificate.h"

namespace podshaper::op {
namespace {

int fail(const std::string& message) {
  std::cerr << "podshaper-operator run: " << message << "\n";
  return 2;
}

// POD_NAME in a Deployment (downward API), else host and pid.
std::string defaultIdentity() {
  if (const char* pod = std::getenv("POD_NAME"); pod != nullptr && *pod != '\0') return pod;
  char host[256] = {};
  gethostname(host, sizeof host - 1);
  return std::string(host) + "_" + std::to_string(getpid());
}

struct RunOptions {
  OperatorConfig config;
  cli::Listen listen;
  std::string identity;
  kube::LeaseConfig lease;
  kube::ClientConfig client;
};

Result<RunOptions> parseRunFlags(int argc, char** argv) {
  auto flags = cli::Flags::parse(argc, argv, 2, {"kubeconfig", "config", "listen", "identity"}, {"in-cluster"});
  if (!flags) return flags.error();
  RunOptions o;
  if (auto path = flags->get("config")) {
    auto text = cli::readFile(*path);
    if (!text) return makeError("config: " + text.error().message);
    auto parsed = parseOperatorConfig(*text);
    if (!parsed) return makeError(*path + ": " + parsed.error().message);
    o.config = *parsed;
  }
  if (auto listen = flags->get("listen")) o.config.listen = *listen;
  auto listen = cli::parseListen(o.config.listen);
  if (!listen) return listen.error();
  o.listen = *listen;
  o.identity = flags->get("identity", defaultIdentity());
  o.lease = {o.config.leaseNamespace, o.config.leaseName,    o.identity,
             o.config.leaseDuration,  o.config.renewDeadline, o.config.retryPeriod};
  if (o.config.leaderElection) {
    if (auto ok = kube::validate(o.lease); !ok) return makeError("leaderElection: " + ok.error().message);
  }
  auto client = kube::clientConfigFor(flags->has("in-cluster"), flags->get("kubeconfig", ""));
  if (!client) return client.error();
  o.client = *client;
  return o;
}

// The serving certificate for /metrics: the configured one, or `own` made self-signed
// (removed at exit).
Result<server::ServerOptions> serverOptions(const RunOptions& o, std::unique_ptr<server::OwnCertificate>& own) {
  server::ServerOptions options;
  options.host = o.listen.host;
  options.port = o.listen.port;
  if (!o.config.tlsCertFile.empty()) {
    options.certFile = o.config.tlsCertFile;
    options.keyFile = o.config.tlsKeyFile;
    return options;
  }
  auto made = server::OwnCertificate::make("podshaper-operator");
  if (!made) return made.error();
  own = std::move(*made);
  options.certFile = own->certFile();
  options.keyFile = own->keyFile();
  return options;
}

std::string describe(const RunOptions& o, bool certificates) {
  const OperatorConfig& c = o.config;
  return (c.leaderElection ? "leader election on lease " + o.lease.ns + "/" + o.lease.name
                           : std::string("leader election off")) +
         (certificates ? ", webhook certificate in Secret " + c.webhookCertificate.ns + "/" +
                             c.webhookCertificate.secretName
                       : std::string());
}

}  // namespace

int runOperator(int argc, char** argv) {
  metrics::useFewArenas();  // before any thread: docs/BENCHMARKS.md "At scale"
  auto parsed = parseRunFlags(argc, argv);
  if (!parsed) return fail(parsed.error().message);
  const RunOptions& o = *parsed;
  std::unique_ptr<server::OwnCertificate> ownCert;
  auto options = serverOptions(o, ownCert);
  if (!options) return fail(options.error().message);

  const sigset_t signals = cli::blockStopSignals();

  auto registry = std::make_shared<metrics::Registry>();
  metrics::Gauge& leaderGauge = registry->gauge("podshaper_operator_leader", "1 while this replica is the leader.");
  metrics::registerBuildInfo(*registry, "operator", PODSHAPER_VERSION);
  kube::Client client(o.client, kube::ClientOptions{.fieldManager = "podshaper-operator",
                                                    .userAgent = "podshaper-operator/" PODSHAPER_VERSION,
                                                    .metrics = registry.get()});
  std::unique_ptr<kube::LeaderElector> elector;
  auto mayWrite = [&elector] { return elector == nullptr || elector->isLeading(); };
  Controller controller(client, o.config, *registry, mayWrite, o.identity);
  std::unique_ptr<WebhookCertificates> certificates;
  if (o.config.webhookCertificate.managed) {
    certificates = std::make_unique<WebhookCertificates>(client, o.config.webhookCertificate, *registry, mayWrite);
  }
  // Leading starts the work: judge everything, check the webhook's certificate.
  auto lead = [&] {
    leaderGauge.set(1);
    controller.enqueueAll();
    if (certificates) certificates->trigger();
  };
  if (o.config.leaderElection) {
    elector = std::make_unique<kube::LeaderElector>(client, o.lease, lead, [&] {
      leaderGauge.set(0);
      controller.forgetVerdicts();
    });
  } else {
    leaderGauge.set(1);
  }

  server::HttpsServer https(*options, registry);
  server::routeProbes(https, registry, [&controller]() -> std::optional<std::string> {
    if (!controller.synced()) return "watches not synced";
    return std::nullopt;
  });
  if (auto started = https.start(); !started) return fail(started.error().message);

  controller.start();
  if (certificates) certificates->start();
  if (elector) {
    elector->start();
  } else {
    lead();
  }
  spdlog::info("podshaper-operator {} as {} on {}:{} ({})", PODSHAPER_VERSION, o.identity, o.listen.host,
               https.boundPort(), describe(o, certificates != nullptr));

  const int signal = cli::waitForStopSignal(signals);
  spdlog::info("podshaper-operator: signal {}, shutting down", signal);
  // Workers first, so that nothing of ours is in flight when the lease is released
  // and the standby takes over at once.
  controller.stop();
  if (certificates) certificates->stop();
  if (elector) elector->stop();
  https.stop();
  return 0;
}

}  // namespace podshaper::op
