#include "operator/run.h"

#include <spdlog/spdlog.h>
#include <unistd.h>

#include <csignal>
#include <cstdlib>
#include <filesystem>
#include <iostream>
#include <memory>

#include "cli/flags.h"
#include "kube/client.h"
#include "kube/config.h"
#include "kube/leader_elector.h"
#include "operator/config.h"
#include "operator/controller.h"
#include "operator/webhook_certs.h"
#include "server/https_server.h"
#include "metrics/metrics.h"
#include "pki/selfsigned.h"

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

// The serving certificate for /metrics when none is configured: self-signed,
// in a private directory removed at exit.
struct TempCert {
  std::filesystem::path dir;
  ~TempCert() {
    std::error_code ignored;
    if (!dir.empty()) std::filesystem::remove_all(dir, ignored);
  }
};

}  // namespace

int runOperator(int argc, char** argv) {
  auto flags = cli::Flags::parse(argc, argv, 2, {"kubeconfig", "config", "listen", "identity"}, {"in-cluster"});
  if (!flags) return fail(flags.error().message);
  OperatorConfig config;
  if (auto path = flags->get("config")) {
    auto text = cli::readFile(*path);
    if (!text) return fail("config: " + text.error().message);
    auto parsed = parseOperatorConfig(*text);
    if (!parsed) return fail(*path + ": " + parsed.error().message);
    config = *parsed;
  }
  if (auto listen = flags->get("listen")) config.listen = *listen;
  auto listen = cli::parseListen(config.listen);
  if (!listen) return fail(listen.error().message);
  const std::string identity = flags->get("identity", defaultIdentity());
  kube::LeaseConfig lease{config.leaseNamespace, config.leaseName, identity, config.leaseDuration,
                          config.renewDeadline, config.retryPeriod};
  if (config.leaderElection) {
    if (auto ok = kube::validate(lease); !ok) return fail("leaderElection: " + ok.error().message);
  }

  auto clientConfig = flags->has("in-cluster") ? kube::inClusterConfig()
                                                : flags->has("kubeconfig") ? kube::loadKubeconfig(*flags->get("kubeconfig"))
                                                                           : kube::resolveClientConfig();
  if (!clientConfig) return fail(clientConfig.error().message);

  TempCert tempCert;
  server::ServerOptions options;
  options.host = listen->host;
  options.port = listen->port;
  if (!config.tlsCertFile.empty()) {
    options.certFile = config.tlsCertFile;
    options.keyFile = config.tlsKeyFile;
  } else {
    char pattern[] = "/tmp/podshaper-operator-XXXXXX";
    if (mkdtemp(pattern) == nullptr) return fail("cannot make a directory for the serving certificate");
    tempCert.dir = pattern;
    options.certFile = (tempCert.dir / "tls.crt").string();
    options.keyFile = (tempCert.dir / "tls.key").string();
    if (auto ok = pki::writeSelfSignedCert(options.certFile, options.keyFile, "podshaper-operator",
                                              {"localhost", "127.0.0.1"}, 365);
        !ok) {
      return fail("serving certificate: " + ok.error().message);
    }
  }

  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGINT);
  sigaddset(&signals, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);

  auto metrics = std::make_shared<metrics::Registry>();
  metrics::Gauge& leaderGauge = metrics->gauge("podshaper_operator_leader", "1 while this replica is the leader.");
  kube::Client client(*clientConfig, kube::ClientOptions{.fieldManager = "podshaper-operator",
                                                         .userAgent = "podshaper-operator/" PODSHAPER_VERSION});
  std::unique_ptr<kube::LeaderElector> elector;
  auto mayWrite = [&elector] { return elector == nullptr || elector->isLeading(); };
  Controller controller(client, config, *metrics, mayWrite, identity);
  std::unique_ptr<WebhookCertificates> certificates;
  if (config.webhookCertificate.managed) {
    certificates = std::make_unique<WebhookCertificates>(client, config.webhookCertificate, *metrics, mayWrite);
  }
  if (config.leaderElection) {
    elector = std::make_unique<kube::LeaderElector>(
        client, lease,
        [&] {
          leaderGauge.set(1);
          controller.enqueueAll();
          if (certificates) certificates->trigger();
        },
        [&] {
          leaderGauge.set(0);
          controller.forgetVerdicts();
        });
  } else {
    leaderGauge.set(1);
  }

  server::HttpsServer https(options, metrics);
  auto text = [](int status, std::string body) { return server::Response{status, "text/plain; charset=utf-8", body}; };
  https.route("GET", "/healthz", [text](const server::Request&) { return text(200, "ok\n"); });
  https.route("GET", "/readyz", [text, &controller](const server::Request&) {
    return controller.synced() ? text(200, "ok\n") : text(503, "watches not synced\n");
  });
  https.route("GET", "/metrics", [metrics](const server::Request&) {
    return server::Response{200, "text/plain; version=0.0.4; charset=utf-8", metrics->render()};
  });
  if (auto started = https.start(); !started) return fail(started.error().message);

  controller.start();
  if (certificates) certificates->start();
  if (elector) {
    elector->start();
  } else {
    controller.enqueueAll();
    if (certificates) certificates->trigger();
  }
  spdlog::info("podshaper-operator {} as {} on {}:{} ({})", PODSHAPER_VERSION, identity, listen->host,
               https.boundPort(),
               (config.leaderElection ? "leader election on lease " + lease.ns + "/" + lease.name
                                      : std::string("leader election off")) +
                   (certificates ? ", webhook certificate in Secret " + config.webhookCertificate.ns + "/" +
                                       config.webhookCertificate.secretName
                                 : std::string()));

  int signal = 0;
  sigwait(&signals, &signal);
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
