#pragma once

// The operator's writes held in memory, for the controllers' and reconcilers' unit tests
// (as controller-runtime's fake client): objects by their API path, merge and strategic
// merge patches as the API server applies them (a status subresource writes only the
// status, a Node's its metadata too), a new resourceVersion on each write, a patch's
// metadata.resourceVersion a precondition (409 Conflict), Events kept, logs and ShmUsages
// served, ShmProfiles made, their status put and deleted; a call can be told to fail. What it
// records reads as the writes did: "status gpu-0", "node gpu-0", "node status gpu-0",
// "event Warning P2PUnavailable on Node in default", "create shmprofile ml/job.train",
// "shmprofile status ml/job.train", "delete shmprofile ml/job.train".

#include <chrono>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "api/names.h"
#include "kube/protocol.h"
#include "operator/reconciler.h"
#include "operator/work_queue.h"
#include "tests/unit/judging/verdict_builder.h"

namespace podshaper::op {

inline std::string reportPath(const std::string& name) {
  return kube::resourcePath(names::kGroupVersion, names::kReportResource, "", name);
}
inline std::string policyPath(const std::string& name) {
  return kube::resourcePath(names::kGroupVersion, names::kPolicyResource, "", name);
}
inline std::string nodePath(const std::string& name) { return kube::resourcePath("v1", "nodes", "", name); }
inline std::string podPath(const std::string& ns, const std::string& name) {
  return kube::resourcePath("v1", "pods", ns, name);
}
inline std::string eventsPath(const std::string& ns) { return kube::resourcePath("v1", "events", ns); }
inline std::string shmUsagePath(const std::string& ns, const std::string& name) {
  return kube::resourcePath(names::kGroupVersion, names::kShmUsageResource, ns, name);
}
inline std::string shmProfilePath(const std::string& ns, const std::string& name = "") {
  return kube::resourcePath(names::kGroupVersion, names::kShmProfileResource, ns, name);
}

class FakeReconcileApi : public ReconcileApi {
 public:
  // One call as it was answered. words: the write in short words, the log read as
  // "ns/pod/container" (with "/previous" for the run before), the ShmUsage read as "ns/name".
  struct Call {
    std::string method, path, words;
    int code = 200;
    nlohmann::json body;
  };

  kube::ApiResult<nlohmann::json> patchReportStatus(const std::string& name, const nlohmann::json& body) override;
  kube::ApiResult<nlohmann::json> patchNode(const std::string& name, const nlohmann::json& patch) override;
  kube::ApiResult<nlohmann::json> patchNodeStatus(const std::string& name, const nlohmann::json& patch) override;
  kube::ApiResult<nlohmann::json> createEvent(const std::string& ns, const nlohmann::json& event) override;
  kube::ApiResult<nlohmann::json> patchPolicyStatus(const std::string& name, const nlohmann::json& patch) override;
  kube::ApiResult<std::string> readLog(const std::string& ns, const std::string& pod, const std::string& container,
                                       bool previous) override;
  kube::ApiResult<nlohmann::json> getShmUsage(const std::string& ns, const std::string& name) override;
  kube::ApiResult<nlohmann::json> getShmProfile(const std::string& ns, const std::string& name) override;
  // A status sent with the object is dropped, as the status subresource has it.
  kube::ApiResult<nlohmann::json> createShmProfile(const std::string& ns, const nlohmann::json& object) override;
  kube::ApiResult<nlohmann::json> putShmProfileStatus(const std::string& ns, const std::string& name,
                                                      const nlohmann::json& object) override;
  kube::ApiResult<nlohmann::json> deleteShmProfile(const std::string& ns, const std::string& name,
                                                   const std::string& resourceVersion) override;

  // As an agent's or an admin's write: a new resourceVersion (and a uid when it has none).
  void put(const std::string& path, nlohmann::json object);
  void putReport(nlohmann::json report) {
    const std::string path = reportPath(report["metadata"]["name"]);
    put(path, std::move(report));
  }
  void putNode(nlohmann::json node) {
    const std::string path = nodePath(node["metadata"]["name"]);
    put(path, std::move(node));
  }
  bool remove(const std::string& path);  // as kubectl delete; false when there was none
  std::optional<nlohmann::json> object(const std::string& path) const;
  // The objects as held now; null: none.
  nlohmann::json report(const std::string& name = "gpu-0") const { return object(reportPath(name)).value_or(nullptr); }
  nlohmann::json node(const std::string& name = "gpu-0") const { return object(nodePath(name)).value_or(nullptr); }
  // Every object whose path starts with `prefix`, by path.
  std::map<std::string, nlohmann::json> objectsUnder(const std::string& prefix) const;
  // What readLog answers for that pod's container (unset: 404).
  void putLog(const std::string& podPath, const std::string& container, std::string text, bool previous = false);

  // The next `times` calls of `method` ("PATCH", "POST", "PUT", "DELETE", "GET") on `path`
  // answer `code` (a ShmProfile's create: on the object's path); with `when`, only those
  // whose body it accepts.
  void fail(const std::string& method, const std::string& path, int code, const std::string& reason, int times = 1,
            const std::string& message = "refused by the test",
            std::function<bool(const nlohmann::json& body)> when = {});
  // Called with each call once answered, before the caller sees the answer.
  void onCall(std::function<void(const Call&)> hook) { onCall_ = std::move(hook); }

  std::vector<Call> calls() const { return calls_; }  // every call, refused ones too
  // The writes that succeeded since the last clearWrites(), in short words.
  std::vector<std::string> writes() const;
  void clearWrites() { mark_ = calls_.size(); }
  std::vector<nlohmann::json> events() const;  // every Event created, in order
  std::vector<std::string> logReads() const;  // every log asked for, in order
  std::vector<std::string> shmUsageReads() const;  // every ShmUsage asked for, in order

 private:
  kube::ApiResult<nlohmann::json> patch(const std::string& path, const nlohmann::json& patch, bool strategic,
                                        std::string words);
  // A GET of the object at `path` (404: none).
  kube::ApiResult<nlohmann::json> get(const std::string& path, std::string words);
  // 409 when `want` is set and is not the stored object's resourceVersion.
  std::optional<kube::ApiError> stale(const nlohmann::json& stored, const std::string& want, const std::string& path);
  std::optional<kube::ApiError> refused(const std::string& method, const std::string& path,
                                        const nlohmann::json& body);
  kube::ApiError answered(Call call, int code, const std::string& reason, const std::string& message);
  void record(Call call);
  void stamp(nlohmann::json& object);

  struct Failure {
    std::string method, path, reason, message;
    int code, times;
    std::function<bool(const nlohmann::json&)> when;
  };
  std::map<std::string, nlohmann::json> objects_;
  std::map<std::string, std::string> logs_;
  std::vector<Failure> failures_;
  std::vector<Call> calls_;
  std::size_t mark_ = 0;
  long long version_ = 1000;
  std::function<void(const Call&)> onCall_;
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
  // The same steady time, as the work queues read it.
  WorkQueue::Now queueNow() const {
    return [this] { return WorkQueue::Clock::time_point(std::chrono::seconds(steady)); };
  }
};

}  // namespace podshaper::op
