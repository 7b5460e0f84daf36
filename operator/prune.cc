#include "operator/prune.h"

#include <chrono>
#include <iostream>
#include <string>
#include <thread>

#include "base/json_util.h"
#include "cli/flags.h"
#include "judging/report_status.h"
#include "kube/client.h"
#include "kube/config.h"
#include "operator/caches.h"

namespace podshaper::op {
namespace {

using nlohmann::json;

constexpr std::chrono::seconds kStopTimeout{120};
constexpr int kConflictRetries = 5;

int fail(const std::string& message, int code) {
  std::cerr << "podshaper-operator prune: " << message << "\n";
  return code;
}

// Deletes the Deployment (its pods first: Foreground) and waits until it is gone.
Result<void> stopDeployment(const kube::Client& client, const std::string& ns, const std::string& name) {
  const std::string path = kube::resourcePath("apps/v1", "deployments", ns, name);
  auto removed = client.remove(path, json{{"propagationPolicy", "Foreground"}});
  if (!removed && !removed.error().isNotFound()) return makeError(removed.error().message);
  const auto until = std::chrono::steady_clock::now() + kStopTimeout;
  while (true) {
    auto got = client.get(path);
    if (!got && got.error().isNotFound()) return {};
    if (std::chrono::steady_clock::now() > until) {
      return makeError("deployment " + ns + "/" + name + " is still there after " +
                       std::to_string(kStopTimeout.count()) + " s (its pods have not ended)");
    }
    std::this_thread::sleep_for(std::chrono::seconds(1));
  }
}

// Brings one Node to no podshaper label, taint or condition; true when it had some.
Result<bool> pruneNode(const kube::Client& client, json node) {
  const std::string name = stringMember(member(node, "metadata"), "name");
  const std::string path = kube::resourcePath("v1", "nodes", "", name);
  bool pruned = false;
  if (const json condition = nodeConditionPatch(node, nullptr, 0); !condition.is_null()) {
    auto patched = client.patchStatus(path, condition, kube::PatchType::StrategicMerge);
    if (!patched && !patched.error().isNotFound()) return makeError(patched.error().message);
    if (!patched) return false;
    pruned = true;
    node = std::move(*patched);
  }
  for (int attempt = 0;; ++attempt) {
    const json patch = nodePatch(node, nullptr);
    if (patch.is_null()) return pruned || attempt > 0;
    auto patched = client.patch(path, patch, kube::PatchType::Merge);
    if (patched) return true;
    if (!patched.error().isConflict() || attempt >= kConflictRetries) return makeError(patched.error().message);
    auto again = client.get(path);  // changed since it was read (the patch carries its resourceVersion)
    if (!again) return again.error().isNotFound() ? Result<bool>(false) : makeError(again.error().message);
    node = std::move(*again);
  }
}

}  // namespace

int runPrune(int argc, char** argv) {
  auto flags = cli::Flags::parse(argc, argv, 2, {"kubeconfig", "namespace", "stop"}, {"in-cluster"});
  if (!flags) return fail(flags.error().message, 2);
  const std::string ns = flags->get("namespace", "");
  const std::string stop = flags->get("stop", "");
  if (!stop.empty() && ns.empty()) return fail("--stop needs --namespace (where the Deployment is)", 2);
  auto config = kube::clientConfigFor(flags->has("in-cluster"), flags->get("kubeconfig", ""));
  if (!config) return fail(config.error().message, 2);
  kube::Client client(*config, kube::ClientOptions{.fieldManager = "podshaper-operator",
                                                   .userAgent = "podshaper-operator/" PODSHAPER_VERSION});
  if (!stop.empty()) {
    if (auto stopped = stopDeployment(client, ns, stop); !stopped) return fail(stopped.error().message, 1);
    std::cout << "prune: deployment " << ns << "/" << stop << " is gone: no operator labels the nodes now\n";
  }
  // What pruning reads of a Node, not the whole object (thousands of Nodes, one pod).
  auto nodes = client.list("/api/v1/nodes", "", "", nullptr, compactNode);
  if (!nodes) return fail(nodes.error().message, 1);
  int cleaned = 0, clean = 0, failed = 0;
  for (const json& node : member(*nodes, "items")) {
    const std::string name = stringMember(member(node, "metadata"), "name");
    if (name.empty()) {  // never from the API server: this code misread the list
      std::cerr << "prune: a Node without a name in the list\n";
      ++failed;
      continue;
    }
    auto pruned = pruneNode(client, node);
    if (!pruned) {
      std::cerr << "prune: node " << name << ": " << pruned.error().message << "\n";
      ++failed;
    } else if (*pruned) {
      std::cout << "prune: node " << name << ": podshaper's labels, taint and condition removed\n";
      ++cleaned;
    } else {
      ++clean;
    }
  }
  std::cout << "prune: " << cleaned << " node(s) cleaned, " << clean << " had nothing of podshaper"
            << (failed ? ", " + std::to_string(failed) + " could not be cleaned" : std::string()) << "\n";
  return failed ? 1 : 0;
}

}  // namespace podshaper::op
