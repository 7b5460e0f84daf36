#include "tests/unit/support/fake_api_server.h"

#define _TURN_OFF_PLATFORM_STRING
#include <cpprest/http_listener.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <stdexcept>
#include <thread>

namespace podshaper::fakes {
namespace {

using nlohmann::json;
using web::http::http_request;
using web::http::methods;

json status(int code, const std::string& reason, const std::string& message) {
  return {{"kind", "Status"}, {"apiVersion", "v1"}, {"metadata", json::object()}, {"status", "Failure"},
          {"message", message}, {"reason", reason}, {"code", code}};
}

std::vector<std::string> segments(const std::string& path) {
  std::vector<std::string> out;
  std::size_t at = 0;
  while (at < path.size()) {
    std::size_t slash = path.find('/', at);
    if (slash == std::string::npos) slash = path.size();
    if (slash > at) out.push_back(path.substr(at, slash - at));
    at = slash + 1;
  }
  return out;
}

// What a path names: an object, a collection, or an object's status, by its segments
// after /api/v1 or /apis/GROUP/VERSION: [res] or [namespaces, ns, res] are collections.
struct Target {
  enum class Kind { kObject, kCollection, kStatus } kind;
  std::string object;  // the object's path (kObject, kStatus)
};

Target targetOf(const std::string& path) {
  auto parts = segments(path);
  const std::size_t prefix = !parts.empty() && parts[0] == "apis" ? 3 : 2;
  std::size_t rest = parts.size() > prefix ? parts.size() - prefix : 0;
  if (rest >= 3 && parts.back() == "status" && (rest == 3 || rest == 5)) {
    return {Target::Kind::kStatus, path.substr(0, path.size() - std::string("/status").size())};
  }
  return {rest % 2 == 1 ? Target::Kind::kCollection : Target::Kind::kObject, path};
}

std::string resourceOf(const std::string& path) {
  auto parts = segments(path);
  return parts.size() >= 2 ? parts[parts.size() - 2] : "objects";
}

// Conditions merged by type, as a strategic merge patch of a status does.
void strategicMerge(json& object, const json& patch) {
  json conditions = object["status"].is_object() ? object["status"].value("conditions", json()) : json();
  object.merge_patch(patch);
  const json& patched = patch.contains("status") ? patch["status"].value("conditions", json()) : json();
  if (!patched.is_array()) return;
  json merged = conditions.is_array() ? conditions : json::array();
  for (const json& c : patched) {
    json kept = json::array();
    for (const json& o : merged) {
      if (o.value("type", "") != c.value("type", "")) kept.push_back(o);
    }
    if (!c.contains("$patch")) kept.push_back(c);
    merged = std::move(kept);
  }
  object["status"]["conditions"] = merged;
}

}  // namespace

int freeLoopbackPort() {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (fd < 0 || ::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) {
    throw std::runtime_error("no free loopback port");
  }
  socklen_t len = sizeof addr;
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len);
  ::close(fd);
  return ntohs(addr.sin_port);
}

struct FakeApiServer::Door {
  std::string url;
  web::http::experimental::listener::http_listener http;
  std::atomic<bool> cut{false};
};

FakeApiServer::FakeApiServer() { openDoor(); }

FakeApiServer::~FakeApiServer() {
  for (auto& door : doors_) door->http.close().wait();
}

std::string FakeApiServer::url(int door) const { return doors_.at(door)->url; }

void FakeApiServer::cut(int door, bool cut) { doors_.at(door)->cut = cut; }

int FakeApiServer::openDoor() {
  auto door = std::make_unique<Door>();
  door->url = "http://127.0.0.1:" + std::to_string(freeLoopbackPort());
  door->http = web::http::experimental::listener::http_listener(door->url);
  Door* d = door.get();
  door->http.support([this, d](http_request request) {
    if (d->cut) {
      request.reply(503, status(503, "ServiceUnavailable", "cut off by the test").dump(), "application/json");
      return;
    }
    const std::string body = request.extract_utf8string(true).get();
    std::string contentType;
    if (request.headers().has("Content-Type")) contentType = request.headers()["Content-Type"];
    const std::string path = request.relative_uri().path();
    std::chrono::milliseconds wait{0};
    bool served = true;
    {
      std::lock_guard lock(mu_);
      if (auto delayed = delays_.find(path); delayed != delays_.end()) wait = delayed->second;
      served = served_.empty() || std::any_of(served_.begin(), served_.end(),
                                              [&](const std::string& p) { return path.starts_with(p); });
    }
    if (wait.count() > 0) std::this_thread::sleep_for(wait);
    if (!served) {
      request.reply(404, "404 page not found\n", "text/plain");
      return;
    }
    Reply reply = serve(request.method(), path, request.relative_uri().query(), contentType, body);
    request.reply(reply.code, reply.body.dump(), "application/json");
  });
  door->http.open().wait();
  std::lock_guard lock(mu_);
  doors_.push_back(std::move(door));
  return static_cast<int>(doors_.size()) - 1;
}

void FakeApiServer::stamp(json& object) {
  object["metadata"]["resourceVersion"] = std::to_string(++version_);
  if (!object["metadata"].contains("uid")) object["metadata"]["uid"] = "uid-" + std::to_string(version_);
}

void FakeApiServer::put(const std::string& path, json object) {
  std::lock_guard lock(mu_);
  stamp(object);
  objects_[path] = std::move(object);
}

std::optional<json> FakeApiServer::object(const std::string& path) const {
  std::lock_guard lock(mu_);
  auto it = objects_.find(path);
  if (it == objects_.end()) return std::nullopt;
  return it->second;
}

void FakeApiServer::fail(const std::string& method, const std::string& path, int code, const std::string& reason,
                         int times, const std::string& message) {
  std::lock_guard lock(mu_);
  failures_.push_back({method, path, reason, message, code, times});
}

void FakeApiServer::delay(const std::string& path, std::chrono::milliseconds by) {
  std::lock_guard lock(mu_);
  delays_[path] = by;
}

void FakeApiServer::servesOnly(std::vector<std::string> prefixes) {
  std::lock_guard lock(mu_);
  served_ = std::move(prefixes);
}

std::vector<std::string> FakeApiServer::writes() const {
  std::lock_guard lock(mu_);
  return writes_;
}

FakeApiServer::Reply FakeApiServer::serve(const std::string& method, const std::string& path, const std::string& query,
                                          const std::string& contentType, const std::string& body) {
  std::lock_guard lock(mu_);
  if (method != methods::GET) writes_.push_back(method + " " + path);
  for (Failure& f : failures_) {
    if (f.times > 0 && f.method == method && f.path == path) {
      --f.times;
      return {f.code, status(f.code, f.reason, f.message)};
    }
  }
  const Target target = targetOf(path);
  auto notFound = [&] {
    return Reply{404, status(404, "NotFound", resourceOf(target.object) + " \"" + segments(target.object).back() +
                                                  "\" not found")};
  };
  json input = body.empty() ? json() : json::parse(body, nullptr, false);
  if (method != methods::GET && method != methods::DEL && (input.is_discarded() || input.is_null())) {
    return {400, status(400, "BadRequest", "the body is not JSON")};
  }

  if (target.kind == Target::Kind::kCollection) {
    if (method == methods::GET) {
      const std::string selector =
          web::uri::decode(web::uri::split_query(query)["fieldSelector"]);  // metadata.name=NAME or none
      json items = json::array();
      for (const auto& [p, o] : objects_) {
        if (!p.starts_with(path + "/") || p.find('/', path.size() + 1) != std::string::npos) continue;
        if (!selector.empty() && selector != "metadata.name=" + p.substr(path.size() + 1)) continue;
        items.push_back(o);
      }
      return {200, {{"kind", "List"}, {"metadata", {{"resourceVersion", std::to_string(version_)}}}, {"items", items}}};
    }
    if (method != methods::POST) return {405, status(405, "MethodNotAllowed", method + " of a collection")};
    json object = input;
    std::string name = object["metadata"].value("name", "");
    if (name.empty() && object["metadata"].contains("generateName")) {
      name = object["metadata"]["generateName"].get<std::string>() + std::to_string(version_ + 1);
      object["metadata"]["name"] = name;
    }
    if (name.empty()) return {422, status(422, "Invalid", "metadata.name: Required value")};
    const std::string at = path + "/" + name;
    if (objects_.contains(at)) {
      return {409, status(409, "AlreadyExists", resourceOf(at) + " \"" + name + "\" already exists")};
    }
    stamp(object);
    objects_[at] = object;
    return {201, object};
  }

  auto it = objects_.find(target.object);
  if (it == objects_.end()) return notFound();
  json& stored = it->second;
  if (method == methods::GET) return {200, stored};
  if (method == methods::DEL) {
    json gone = stored;
    objects_.erase(it);
    return {200, gone};
  }
  const std::string want = input.is_object() && input.contains("metadata") && input["metadata"].is_object()
                               ? input["metadata"].value("resourceVersion", "")
                               : "";
  if (!want.empty() && want != stored["metadata"].value("resourceVersion", "")) {
    return {409, status(409, "Conflict",
                        "Operation cannot be fulfilled on " + resourceOf(target.object) + " \"" +
                            segments(target.object).back() +
                            "\": the object has been modified; please apply your changes to the latest version and "
                            "try again")};
  }
  json next = stored;
  if (method == methods::PUT) {
    if (target.kind == Target::Kind::kStatus) {
      next["status"] = input.value("status", json::object());
    } else {
      json keepStatus = stored.value("status", json());
      next = input;
      if (!keepStatus.is_null()) next["status"] = keepStatus;  // the main resource does not write status
      else next.erase("status");
    }
  } else if (method == methods::PATCH) {
    if (contentType.find("json-patch") != std::string::npos) {
      try {
        next = stored.patch(input);
      } catch (const json::exception& e) {
        return {422, status(422, "Invalid", e.what())};
      }
    } else if (contentType.find("strategic-merge-patch") != std::string::npos) {
      strategicMerge(next, input);
    } else {
      next.merge_patch(input);
    }
    if (target.kind == Target::Kind::kStatus) {
      json onlyStatus = stored;
      onlyStatus["status"] = next.value("status", json::object());
      next = onlyStatus;
    } else if (stored.contains("status")) {
      next["status"] = stored["status"];  // the main resource does not write status
    } else {
      next.erase("status");
    }
  } else {
    return {405, status(405, "MethodNotAllowed", method)};
  }
  next["metadata"]["name"] = stored["metadata"]["name"];
  next["metadata"]["uid"] = stored["metadata"]["uid"];
  stamp(next);
  stored = next;
  return {200, stored};
}

}  // namespace podshaper::fakes
