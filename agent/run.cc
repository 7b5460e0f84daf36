#include "agent/run.h"

#include <spdlog/spdlog.h>

#include <csignal>
#include <ctime>
#include <iostream>

#include "agent/backend.h"
#include "cli/flags.h"
#include "core/quantity.h"
#include "core/report.h"
#include "kube/client.h"
#include "kube/config.h"
#include "kube/protocol.h"

namespace podshaper::agent {
namespace {

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

// One probe and, when needed, one write: get → compare → create or patch. A
// steady node causes a write only when the heartbeat is due.
Result<std::string> reconcile(const kube::Client& client, Backend& backend, const std::string& node,
                              long long heartbeatSeconds) {
  auto topology = backend.probe();
  if (!topology) return makeError("probe: " + topology.error().message);
  const std::string path = "/apis/podshaper.io/v1alpha1/gputopologyreports/" + node;
  nlohmann::json spec = reportSpec(*topology, nowRfc3339());
  auto existing = client.get(path);
  if (!existing && existing.error().isNotFound()) {
    auto nodeObject = client.get(kube::resourcePath("v1", "nodes", "", node));
    if (!nodeObject) return makeError("Node " + node + ": " + nodeObject.error().message);
    std::string uid = nodeObject->value("/metadata/uid"_json_pointer, std::string());
    auto created = client.create("/apis/podshaper.io/v1alpha1/gputopologyreports", newReport(node, uid, spec));
    if (!created) return makeError("create: " + created.error().message);
    return std::string("created");
  }
  if (!existing) return makeError("get: " + existing.error().message);
  const nlohmann::json& current = existing->contains("spec") ? (*existing)["spec"] : nlohmann::json();
  bool changed = !sameMeasurement(current, spec);
  // The heartbeat is judged from the stored observedAt, so a restarted agent does
  // not write just because it restarted.
  if (!changed && !heartbeatDue(current, std::time(nullptr), heartbeatSeconds)) return std::string("unchanged");
  // The whole object back (PUT) with the resourceVersion read: a concurrent
  // writer makes it a 409. Not a merge patch: that would drop the spec's nulls
  // ("unknown"), and the next compare would see a change that is not there.
  nlohmann::json updated = *existing;
  updated["spec"] = spec;
  auto replaced = client.replace(path, updated);
  if (!replaced) return makeError("update: " + replaced.error().message);
  return std::string(changed ? "updated" : "heartbeat");
}

}  // namespace

int runReporter(int argc, char** argv) {
  auto flags = cli::Flags::parse(argc, argv, 2,
                                 {"node", "fixture", "p2p-fixture", "kubeconfig", "interval", "heartbeat"}, {"once"});
  if (!flags) return fail(flags.error().message);
  if (auto ok = flags->require({"node"}); !ok) return fail(ok.error().message);
  if (flags->has("p2p-fixture") && !flags->has("fixture")) {
    return fail("--p2p-fixture needs --fixture (the nvidia-smi topo -m output it goes with)");
  }
  auto interval = parseCount(flags->get("interval", "60"));
  auto heartbeat = parseCount(flags->get("heartbeat", "300"));
  if (!interval || *interval == 0 || !heartbeat) return fail("--interval and --heartbeat take whole seconds");
  auto config = flags->has("kubeconfig") ? kube::loadKubeconfig(*flags->get("kubeconfig")) : kube::inClusterConfig();
  if (!config) return fail(config.error().message);

  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGINT);
  sigaddset(&signals, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);

  kube::Client client(*config);
  auto backend = flags->has("fixture") ? makeFixtureBackend(*flags->get("fixture"), flags->get("p2p-fixture", ""))
                                       : makeNvmlBackend();
  const std::string node = *flags->get("node");
  while (true) {
    auto result = reconcile(client, *backend, node, static_cast<long long>(*heartbeat));
    if (result) {
      spdlog::info("agent: GPUTopologyReport/{}: {}", node, *result);
    } else {
      spdlog::warn("agent: GPUTopologyReport/{}: {}", node, result.error().message);
    }
    if (flags->has("once")) return result ? 0 : 1;
    timespec wait{static_cast<time_t>(*interval), 0};
    if (sigtimedwait(&signals, nullptr, &wait) > 0) {
      spdlog::info("agent: signal received, stopping");
      return 0;
    }
  }
}

}  // namespace podshaper::agent
