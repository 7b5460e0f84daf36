#include "tests/unit/operator/fake_reconcile_api.h"

#include "tests/unit/support/fake_api_server.h"

namespace podshaper::op {

using nlohmann::json;

namespace {

std::string lastSegment(const std::string& path) { return path.substr(path.rfind('/') + 1); }
std::string resourceOf(const std::string& path) {
  const auto parts = fakes::pathSegments(path);
  return parts.size() >= 2 ? parts[parts.size() - 2] : "objects";
}

}  // namespace

void FakeReconcileApi::stamp(json& object) {
  object["metadata"]["resourceVersion"] = std::to_string(++version_);
  if (!object["metadata"].contains("uid")) object["metadata"]["uid"] = "uid-" + std::to_string(version_);
}

void FakeReconcileApi::put(const std::string& path, json object) {
  stamp(object);
  objects_[path] = std::move(object);
}

bool FakeReconcileApi::remove(const std::string& path) { return objects_.erase(path) > 0; }

std::optional<json> FakeReconcileApi::object(const std::string& path) const {
  auto it = objects_.find(path);
  if (it == objects_.end()) return std::nullopt;
  return it->second;
}

std::map<std::string, json> FakeReconcileApi::objectsUnder(const std::string& prefix) const {
  std::map<std::string, json> out;
  for (auto it = objects_.lower_bound(prefix); it != objects_.end() && it->first.starts_with(prefix); ++it) {
    out.insert(*it);
  }
  return out;
}

void FakeReconcileApi::putLog(const std::string& podPath, const std::string& container, std::string text,
                              bool previous) {
  logs_[podPath + "/log?container=" + container + (previous ? "&previous" : "")] = std::move(text);
}

void FakeReconcileApi::fail(const std::string& method, const std::string& path, int code, const std::string& reason,
                            int times, const std::string& message, std::function<bool(const json& body)> when) {
  failures_.push_back({method, path, reason, message, code, times, std::move(when)});
}

void FakeReconcileApi::record(Call call) {
  calls_.push_back(std::move(call));
  if (onCall_) onCall_(calls_.back());
}

kube::ApiError FakeReconcileApi::answered(Call call, int code, const std::string& reason, const std::string& message) {
  kube::ApiError error =
      kube::makeApiError(code, reason, call.method + " " + call.path + ": " + std::to_string(code) + " " + reason +
                                           ": " + message);
  call.code = code;
  record(std::move(call));
  return error;
}

std::optional<kube::ApiError> FakeReconcileApi::refused(const std::string& method, const std::string& path,
                                                        const json& body) {
  for (Failure& f : failures_) {
    if (f.times > 0 && f.method == method && f.path == path && (!f.when || f.when(body))) {
      --f.times;
      return kube::makeApiError(f.code, f.reason, f.message);
    }
  }
  return std::nullopt;
}

kube::ApiResult<json> FakeReconcileApi::patch(const std::string& path, const json& input, bool strategic,
                                              std::string words) {
  const bool status = path.ends_with("/status");
  const std::string objectPath = status ? path.substr(0, path.size() - 7) : path;
  Call call{"PATCH", path, std::move(words), 200, input};
  if (auto e = refused("PATCH", path, input)) return answered(std::move(call), e->code, e->reason, e->message);
  auto it = objects_.find(objectPath);
  if (it == objects_.end()) {
    return answered(std::move(call), 404, "NotFound",
                    resourceOf(objectPath) + " \"" + lastSegment(objectPath) + "\" not found");
  }
  json& stored = it->second;
  const std::string want = input.contains("metadata") ? input["metadata"].value("resourceVersion", "") : "";
  if (auto e = stale(stored, want, objectPath)) return answered(std::move(call), e->code, e->reason, e->message);
  json next = stored;
  if (strategic) {
    fakes::strategicMerge(next, input);
  } else {
    next.merge_patch(input);
  }
  if (status) {
    // A status subresource writes only the status; a Node's its metadata too (the API
    // server's node status strategy keeps only the spec).
    json onlyStatus = stored;
    onlyStatus["status"] = next.value("status", json::object());
    if (resourceOf(objectPath) == "nodes") onlyStatus["metadata"] = next["metadata"];
    next = std::move(onlyStatus);
  } else if (stored.contains("status")) {
    next["status"] = stored["status"];  // the main resource does not write status
  } else {
    next.erase("status");
  }
  next["metadata"]["name"] = stored["metadata"]["name"];
  next["metadata"]["uid"] = stored["metadata"]["uid"];
  stamp(next);
  stored = next;
  record(std::move(call));
  return next;
}

kube::ApiResult<json> FakeReconcileApi::patchReportStatus(const std::string& name, const json& body) {
  return patch(reportPath(name) + "/status", body, false, "status " + name);
}

kube::ApiResult<json> FakeReconcileApi::patchNode(const std::string& name, const json& patch) {
  return this->patch(nodePath(name), patch, false, "node " + name);
}

kube::ApiResult<json> FakeReconcileApi::patchNodeStatus(const std::string& name, const json& patch) {
  return this->patch(nodePath(name) + "/status", patch, true, "node status " + name);
}

kube::ApiResult<json> FakeReconcileApi::patchPolicyStatus(const std::string& name, const json& patch) {
  return this->patch(policyPath(name) + "/status", patch, false, "policy status " + name);
}

kube::ApiResult<json> FakeReconcileApi::createEvent(const std::string& ns, const json& event) {
  const std::string path = eventsPath(ns);
  Call call{"POST", path,
            "event " + event.value("type", "") + " " + event.value("reason", "") + " on " +
                event.value("involvedObject", json::object()).value("kind", "") + " in " + ns,
            201, event};
  if (auto e = refused("POST", path, event)) return answered(std::move(call), e->code, e->reason, e->message);
  json object = event;
  std::string name = object["metadata"].value("name", "");
  if (name.empty()) name = object["metadata"].value("generateName", "") + std::to_string(version_ + 1);
  object["metadata"]["name"] = name;
  if (objects_.contains(path + "/" + name)) {
    return answered(std::move(call), 409, "AlreadyExists", "events \"" + name + "\" already exists");
  }
  stamp(object);
  objects_[path + "/" + name] = object;
  record(std::move(call));
  return object;
}

kube::ApiResult<std::string> FakeReconcileApi::readLog(const std::string& ns, const std::string& pod,
                                                       const std::string& container, bool previous) {
  const std::string path = podPath(ns, pod) + "/log";
  Call call{"GET", path, ns + "/" + pod + "/" + container + (previous ? "/previous" : ""), 200, nullptr};
  if (auto e = refused("GET", path, nullptr)) return answered(std::move(call), e->code, e->reason, e->message);
  auto log = logs_.find(path + "?container=" + container + (previous ? "&previous" : ""));
  if (log == logs_.end()) return answered(std::move(call), 404, "NotFound", "no log of container \"" + container + "\"");
  record(std::move(call));
  return log->second;
}

std::optional<kube::ApiError> FakeReconcileApi::stale(const json& stored, const std::string& want,
                                                      const std::string& path) {
  if (want.empty() || want == stored["metadata"].value("resourceVersion", "")) return std::nullopt;
  return kube::makeApiError(409, "Conflict",
                            "Operation cannot be fulfilled on " + resourceOf(path) + " \"" + lastSegment(path) +
                                "\": the object has been modified; please apply your changes to the latest version "
                                "and try again");
}

kube::ApiResult<json> FakeReconcileApi::get(const std::string& path, std::string words) {
  Call call{"GET", path, std::move(words), 200, nullptr};
  if (auto e = refused("GET", path, nullptr)) return answered(std::move(call), e->code, e->reason, e->message);
  auto it = objects_.find(path);
  if (it == objects_.end()) {
    return answered(std::move(call), 404, "NotFound", resourceOf(path) + " \"" + lastSegment(path) + "\" not found");
  }
  record(std::move(call));
  return it->second;
}

kube::ApiResult<json> FakeReconcileApi::getShmUsage(const std::string& ns, const std::string& name) {
  return get(shmUsagePath(ns, name), ns + "/" + name);
}

kube::ApiResult<json> FakeReconcileApi::getShmProfile(const std::string& ns, const std::string& name) {
  return get(shmProfilePath(ns, name), ns + "/" + name);
}

kube::ApiResult<json> FakeReconcileApi::createShmProfile(const std::string& ns, const json& object) {
  const std::string name = object["metadata"].value("name", "");
  const std::string path = shmProfilePath(ns, name);
  Call call{"POST", shmProfilePath(ns), "create shmprofile " + ns + "/" + name, 201, object};
  if (auto e = refused("POST", path, object)) return answered(std::move(call), e->code, e->reason, e->message);
  if (objects_.contains(path)) {
    return answered(std::move(call), 409, "AlreadyExists", "shmprofiles \"" + name + "\" already exists");
  }
  json created = object;
  created.erase("status");
  created["metadata"].erase("resourceVersion");
  stamp(created);
  objects_[path] = created;
  record(std::move(call));
  return created;
}

kube::ApiResult<json> FakeReconcileApi::putShmProfileStatus(const std::string& ns, const std::string& name,
                                                            const json& object) {
  const std::string path = shmProfilePath(ns, name);
  Call call{"PUT", path + "/status", "shmprofile status " + ns + "/" + name, 200, object};
  if (auto e = refused("PUT", path + "/status", object)) return answered(std::move(call), e->code, e->reason, e->message);
  auto it = objects_.find(path);
  if (it == objects_.end()) return answered(std::move(call), 404, "NotFound", "shmprofiles \"" + name + "\" not found");
  if (auto e = stale(it->second, object["metadata"].value("resourceVersion", ""), path)) {
    return answered(std::move(call), e->code, e->reason, e->message);
  }
  it->second["status"] = object.value("status", json::object());
  stamp(it->second);
  record(std::move(call));
  return it->second;
}

kube::ApiResult<json> FakeReconcileApi::deleteShmProfile(const std::string& ns, const std::string& name,
                                                         const std::string& resourceVersion) {
  const std::string path = shmProfilePath(ns, name);
  Call call{"DELETE", path, "delete shmprofile " + ns + "/" + name, 200, resourceVersion};
  if (auto e = refused("DELETE", path, nullptr)) return answered(std::move(call), e->code, e->reason, e->message);
  auto it = objects_.find(path);
  if (it == objects_.end()) return answered(std::move(call), 404, "NotFound", "shmprofiles \"" + name + "\" not found");
  if (auto e = stale(it->second, resourceVersion, path)) return answered(std::move(call), e->code, e->reason, e->message);
  json gone = it->second;
  objects_.erase(it);
  record(std::move(call));
  return gone;
}

std::vector<std::string> FakeReconcileApi::writes() const {
  std::vector<std::string> out;
  for (std::size_t i = mark_; i < calls_.size(); ++i) {
    if (calls_[i].method != "GET" && calls_[i].code < 300) out.push_back(calls_[i].words);
  }
  return out;
}

std::vector<json> FakeReconcileApi::events() const {
  std::vector<json> out;
  for (const Call& c : calls_) {
    if (c.method == "POST" && c.code < 300) out.push_back(c.body);
  }
  return out;
}

std::vector<std::string> FakeReconcileApi::logReads() const {
  std::vector<std::string> out;
  for (const Call& c : calls_) {
    if (c.method == "GET" && c.path.ends_with("/log")) out.push_back(c.words);
  }
  return out;
}

std::vector<std::string> FakeReconcileApi::shmUsageReads() const {
  std::vector<std::string> out;
  for (const Call& c : calls_) {
    if (c.method == "GET" && resourceOf(c.path) == names::kShmUsageResource) out.push_back(c.words);
  }
  return out;
}

}  // namespace podshaper::op
