#pragma once

// The operator's reconcilers' view of the API server and their clock, for their unit
// tests: one fake, shared by the report and the pod reconciler's tests.

#include <deque>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "operator/reconciler.h"
#include "tests/unit/judging/verdict_builder.h"

namespace podshaper::op {

// The API server as the reconcile sees it: every write is recorded and applied to
// the objects it holds (a new resourceVersion each time), or refused when a test
// queues an error for it.
class FakeApi : public ReconcileApi {
 public:
  json report, node;  // the objects as stored; null: none
  std::vector<std::string> writes;  // "status gpu-0", "node gpu-0", "event Warning P2PUnavailable on Node"
  std::vector<json> events;
  std::deque<kube::ApiError> statusErrors, nodeErrors, nodeStatusErrors, eventErrors;
  std::function<void()> afterStatusWrite;
  std::function<bool(const json& event)> refuseEvent;  // true: this Event's create fails
  // "ns/pod/container" (with "/previous" for the run before) → its log; absent: 404.
  std::map<std::string, std::string> logs;
  std::deque<kube::ApiError> logErrors;
  std::vector<std::string> logReads;  // the keys read, in order

  kube::ApiResult<json> patchReportStatus(const std::string& name, const json& body) override {
    if (!statusErrors.empty()) return failWith(statusErrors);
    writes.push_back("status " + name);
    report["status"] = body["status"];
    bump(report);
    if (afterStatusWrite) afterStatusWrite();
    return report;
  }
  kube::ApiResult<json> patchNode(const std::string& name, const json& patch) override {
    if (!nodeErrors.empty()) return failWith(nodeErrors);
    writes.push_back("node " + name);
    json merged = node;
    merged.merge_patch(patch);
    node = merged;
    bump(node);
    return node;
  }
  kube::ApiResult<json> patchNodeStatus(const std::string& name, const json& patch) override {
    if (!nodeStatusErrors.empty()) return failWith(nodeStatusErrors);
    writes.push_back("node status " + name);
    // Strategic merge of conditions by type, as the API server does.
    json& conds = node["status"]["conditions"];
    if (!conds.is_array()) conds = json::array();
    for (const json& c : patch["status"]["conditions"]) {
      json kept = json::array();
      for (const json& o : conds) {
        if (o["type"] != c["type"]) kept.push_back(o);
      }
      if (!c.contains("$patch")) kept.push_back(c);
      conds = kept;
    }
    bump(node);
    return node;
  }
  kube::ApiResult<json> createEvent(const std::string& ns, const json& event) override {
    if (!eventErrors.empty()) return failWith(eventErrors);
    if (refuseEvent && refuseEvent(event)) return kube::makeApiError(500, "InternalError", "refused by the test");
    writes.push_back("event " + event["type"].get<std::string>() + " " + event["reason"].get<std::string>() + " on " +
                     event["involvedObject"]["kind"].get<std::string>() + " in " + ns);
    events.push_back(event);
    return event;
  }
  kube::ApiResult<std::string> readLog(const std::string& ns, const std::string& pod, const std::string& container,
                                       bool previous) override {
    const std::string key = ns + "/" + pod + "/" + container + (previous ? "/previous" : "");
    logReads.push_back(key);
    if (!logErrors.empty()) return failWith<std::string>(logErrors);
    auto it = logs.find(key);
    if (it == logs.end()) return kube::makeApiError(404, "NotFound", "no log of " + key);
    return it->second;
  }

 private:
  template <typename T = json>
  static kube::ApiResult<T> failWith(std::deque<kube::ApiError>& errors) {
    kube::ApiError e = errors.front();
    errors.pop_front();
    return e;
  }
  void bump(json& object) {
    object["metadata"]["resourceVersion"] = std::to_string(++version_);
  }
  int version_ = 100;
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
