#pragma once

// The operator's reconcilers' view of the API server and their clock, for their unit
// tests: the ReconcileApi the operator runs (KubeReconcileApi over kube::Client) against
// the shared fake API server, and what a test reads back from it.

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "api/names.h"
#include "kube/client.h"
#include "kube/protocol.h"
#include "operator/controller.h"
#include "operator/reconciler.h"
#include "tests/unit/judging/verdict_builder.h"
#include "tests/unit/kube/black_hole.h"
#include "tests/unit/support/fake_api_server.h"

namespace podshaper::op {

inline std::string reportPath(const std::string& name) {
  return kube::resourcePath(names::kGroupVersion, names::kReportResource, "", name);
}
inline std::string nodePath(const std::string& name) { return kube::resourcePath("v1", "nodes", "", name); }
inline std::string podPath(const std::string& ns, const std::string& name) {
  return kube::resourcePath("v1", "pods", ns, name);
}
inline std::string eventsPath(const std::string& ns) { return kube::resourcePath("v1", "events", ns); }

class ServedReconcileApi {
 public:
  fakes::FakeApiServer server;
  kube::Client client{kube::serverAt(server.url())};
  KubeReconcileApi api{client};

  // The objects as the server holds them; null: none.
  nlohmann::json report(const std::string& name = "gpu-0") const {
    return server.object(reportPath(name)).value_or(nullptr);
  }
  nlohmann::json node(const std::string& name = "gpu-0") const {
    return server.object(nodePath(name)).value_or(nullptr);
  }
  // As an agent's or an admin's write: stored under the object's name, a new resourceVersion.
  void putReport(nlohmann::json report) {
    const std::string path = reportPath(report["metadata"]["name"]);
    server.put(path, std::move(report));
  }
  void putNode(nlohmann::json node) {
    const std::string path = nodePath(node["metadata"]["name"]);
    server.put(path, std::move(node));
  }

  // The writes that succeeded since the last clearWrites(), in short words: "status gpu-0",
  // "node gpu-0", "node status gpu-0", "event Warning P2PUnavailable on Node in default".
  std::vector<std::string> writes() const {
    std::vector<std::string> out;
    const auto served = server.requests();
    for (std::size_t i = mark_; i < served.size(); ++i) {
      const fakes::Served& s = served[i];
      if (s.method != "GET" && s.code < 300) out.push_back(words(s));
    }
    return out;
  }
  void clearWrites() { mark_ = server.requests().size(); }
  // Every Event created, in order.
  std::vector<nlohmann::json> events() const {
    std::vector<nlohmann::json> out;
    for (const fakes::Served& s : server.requests()) {
      if (s.method == "POST" && s.path.ends_with("/events") && s.code < 300) out.push_back(s.body);
    }
    return out;
  }
  // The logs asked for, in order: "ns/pod/container", with "/previous" for the run before.
  std::vector<std::string> logReads() const {
    std::vector<std::string> out;
    for (const fakes::Served& s : server.requests()) {
      if (s.method != "GET" || !s.path.ends_with("/log")) continue;
      const auto parts = fakes::pathSegments(s.path);  // api v1 namespaces NS pods POD log
      auto param = [&](const char* k) { return s.params.contains(k) ? s.params.at(k) : std::string(); };
      out.push_back(parts[3] + "/" + parts[5] + "/" + param("container") +
                    (param("previous") == "true" ? "/previous" : ""));
    }
    return out;
  }

 private:
  static std::string words(const fakes::Served& s) {
    const std::string reports = kube::resourcePath(names::kGroupVersion, names::kReportResource) + "/";
    const std::string nodes = "/api/v1/nodes/";
    if (s.path.starts_with(reports) && s.path.ends_with("/status")) {
      return "status " + s.path.substr(reports.size(), s.path.size() - reports.size() - 7);
    }
    if (s.path.starts_with(nodes) && s.path.ends_with("/status")) {
      return "node status " + s.path.substr(nodes.size(), s.path.size() - nodes.size() - 7);
    }
    if (s.path.starts_with(nodes)) return "node " + s.path.substr(nodes.size());
    if (s.method == "POST" && s.path.ends_with("/events")) {
      return "event " + s.body.value("type", "") + " " + s.body.value("reason", "") + " on " +
             s.body.value("involvedObject", nlohmann::json::object()).value("kind", "") + " in " +
             fakes::pathSegments(s.path)[3];
    }
    return s.method + " " + s.path;
  }
  std::size_t mark_ = 0;
};

class FakeClock : public Clock {
 public:
  long long wall = kNow, steady = 1000;
  long long wallMicros() const override { return wall * 1000000; }
  long long steadySeconds() const override { return steady; }
  void advance(long long seconds) {
    wall += seconds;
    steady += seconds;
  }
};

}  // namespace podshaper::op
