#include "tests/unit/support/fake_api_server.h"

#define _TURN_OFF_PLATFORM_STRING
#include <cpprest/http_listener.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <mutex>
#include <utility>
#include <stdexcept>
#include <thread>
#include <vector>

namespace podshaper::fakes {
namespace {

using nlohmann::json;
using web::http::http_request;
using web::http::methods;

json status(int code, const std::string& reason, const std::string& message) {
  return {{"kind", "Status"}, {"apiVersion", "v1"}, {"metadata", json::object()}, {"status", "Failure"},
          {"message", message}, {"reason", reason}, {"code", code}};
}

}  // namespace

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

std::vector<std::string> pathSegments(const std::string& path) {
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

namespace {

// What a path names: an object, a collection, or an object's status, by its segments
// after /api/v1 or /apis/GROUP/VERSION: [res] or [namespaces, ns, res] are collections.
struct Target {
  enum class Kind { kObject, kCollection, kStatus } kind;
  std::string object;  // the object's path (kObject, kStatus)
};

Target targetOf(const std::string& path) {
  auto parts = pathSegments(path);
  const std::size_t prefix = !parts.empty() && parts[0] == "apis" ? 3 : 2;
  std::size_t rest = parts.size() > prefix ? parts.size() - prefix : 0;
  if (rest >= 3 && parts.back() == "status" && (rest == 3 || rest == 5)) {
    return {Target::Kind::kStatus, path.substr(0, path.size() - std::string("/status").size())};
  }
  return {rest % 2 == 1 ? Target::Kind::kCollection : Target::Kind::kObject, path};
}

std::string resourceOf(const std::string& path) {
  auto parts = pathSegments(path);
  return parts.size() >= 2 ? parts[parts.size() - 2] : "objects";
}

// Whether the object at `object` is in the collection at `collection`: directly, or, for
// a namespaced resource listed across namespaces (/api/v1/pods), in any namespace.
bool inCollection(const std::string& collection, const std::string& object) {
  if (object.starts_with(collection + "/") && object.find('/', collection.size() + 1) == std::string::npos) return true;
  const auto c = pathSegments(collection), o = pathSegments(object);
  const std::size_t prefix = !c.empty() && c[0] == "apis" ? 3 : 2;
  return c.size() == prefix + 1 && o.size() == prefix + 4 && std::equal(c.begin(), c.begin() + prefix, o.begin()) &&
         o[prefix] == "namespaces" && o[prefix + 2] == c[prefix];
}

// A list's or a watch's selectors: fieldSelector metadata.name=NAME, and labelSelector
// terms k=v, k==v, k!=v, k, !k joined by commas (what the product's clients send).
struct Selector {
  std::string name;
  struct Term {
    std::string key, value;
    enum class Op { kEquals, kNotEquals, kExists, kAbsent } op;
  };
  std::vector<Term> labels;

  bool selects(const std::string& path, const json& object) const {
    if (!name.empty() && pathSegments(path).back() != name) return false;
    const json& meta = object.contains("metadata") ? object["metadata"] : json();
    const json& have = meta.is_object() && meta.contains("labels") ? meta["labels"] : json();
    for (const Term& t : labels) {
      const bool has = have.is_object() && have.contains(t.key) && have[t.key].is_string();
      const std::string value = has ? have[t.key].get<std::string>() : "";
      const bool ok = t.op == Term::Op::kEquals      ? has && value == t.value
                      : t.op == Term::Op::kNotEquals ? !has || value != t.value
                      : t.op == Term::Op::kExists    ? has
                                                     : !has;
      if (!ok) return false;
    }
    return true;
  }
};

// The selectors of a query, or why the fake cannot honour them.
std::optional<Selector> selectorOf(const std::map<std::string, std::string>& query, std::string& why) {
  auto param = [&](const char* k) {
    auto it = query.find(k);
    return it == query.end() ? std::string() : web::uri::decode(it->second);
  };
  Selector s;
  if (const std::string fields = param("fieldSelector"); !fields.empty()) {
    if (!fields.starts_with("metadata.name=")) {
      why = "fieldSelector " + fields + ": the fake serves metadata.name=NAME only";
      return std::nullopt;
    }
    s.name = fields.substr(std::string("metadata.name=").size());
  }
  const std::string labels = param("labelSelector");
  std::size_t at = 0;
  while (at < labels.size()) {
    std::size_t comma = labels.find(',', at);
    if (comma == std::string::npos) comma = labels.size();
    const std::string term = labels.substr(at, comma - at);
    at = comma + 1;
    using Op = Selector::Term::Op;
    if (term.find_first_of(" ()") != std::string::npos) {
      why = "labelSelector " + labels + ": the fake serves k=v, k!=v, k and !k only";
      return std::nullopt;
    }
    if (auto ne = term.find("!="); ne != std::string::npos) {
      s.labels.push_back({term.substr(0, ne), term.substr(ne + 2), Op::kNotEquals});
    } else if (auto eq = term.find('='); eq != std::string::npos) {
      const std::size_t skip = term.compare(eq, 2, "==") == 0 ? 2 : 1;
      s.labels.push_back({term.substr(0, eq), term.substr(eq + skip), Op::kEquals});
    } else if (term.starts_with("!")) {
      s.labels.push_back({term.substr(1), "", Op::kAbsent});
    } else if (!term.empty()) {
      s.labels.push_back({term, "", Op::kExists});
    }
  }
  return s;
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
  // Requests being answered, and the answers still being sent: the listener is closed only
  // once none is left (cpprest's listener crashes on an answer sent while it closes, as a
  // watch answered at the server's end was).
  std::mutex mu;
  std::condition_variable idle;
  int handling = 0;
  std::vector<pplx::task<void>> sending;

  void send(pplx::task<void> reply) {
    std::lock_guard lock(mu);
    std::erase_if(sending, [](const pplx::task<void>& t) { return t.is_done(); });
    sending.push_back(std::move(reply));
  }
  // One request being handled, for drain().
  struct Handling {
    Door& door;
    explicit Handling(Door& d) : door(d) {
      std::lock_guard lock(door.mu);
      ++door.handling;
    }
    ~Handling() {
      std::lock_guard lock(door.mu);
      if (--door.handling == 0) door.idle.notify_all();
    }
    Handling(const Handling&) = delete;
    Handling& operator=(const Handling&) = delete;
  };
  // Waits for every request to be answered and every answer sent.
  void drain() {
    std::vector<pplx::task<void>> replies;
    {
      std::unique_lock lock(mu);
      idle.wait(lock, [this] { return handling == 0; });
      replies.swap(sending);
    }
    for (auto& reply : replies) {
      try {
        reply.wait();
      } catch (const std::exception&) {
        // the client went away: nothing left to send
      }
    }
  }
};



FakeApiServer::FakeApiServer() { openDoor(); }

FakeApiServer::~FakeApiServer() {
  {
    std::lock_guard lock(mu_);
    closing_ = true;  // open watches end now
  }
  changes_.notify_all();
  for (auto& door : doors_) {
    door->drain();
    door->http.close().wait();
  }
}

std::string FakeApiServer::url(int door) const { return doors_.at(door)->url; }

void FakeApiServer::cut(int door, bool cut) { doors_.at(door)->cut = cut; }

int FakeApiServer::openDoor() {
  auto door = std::make_unique<Door>();
  door->url = "http://127.0.0.1:" + std::to_string(freeLoopbackPort());
  door->http = web::http::experimental::listener::http_listener(door->url);
  Door* d = door.get();
  door->http.support([this, d](http_request request) {
    Door::Handling handling(*d);
    if (d->cut) {
      d->send(request.reply(503, status(503, "ServiceUnavailable", "cut off by the test").dump(), "application/json"));
      return;
    }
    const std::string text = request.extract_utf8string(true).get();
    std::string contentType;
    if (request.headers().has("Content-Type")) contentType = request.headers()["Content-Type"];
    const std::string method = request.method();
    const std::string path = request.relative_uri().path();
    const std::string query = request.relative_uri().query();
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
      d->send(request.reply(404, "404 page not found\n", "text/plain"));
      return;
    }
    const json input = text.empty() ? json() : json::parse(text, nullptr, false);
    auto params = web::uri::split_query(query);
    const bool watching = method == methods::GET && (params["watch"] == "1" || params["watch"] == "true");
    const Reply reply = watching ? watch(path, query) : serve(method, path, query, contentType, input);
    std::map<std::string, std::string> decoded;
    for (const auto& [k, v] : params) decoded[k] = web::uri::decode(v);
    Served done{method, path, query, std::move(decoded), reply.code, input.is_discarded() ? json(text) : input};
    std::function<void(const Served&)> hook;
    {
      std::lock_guard lock(mu_);
      requests_.push_back(done);
      hook = onServed_;
    }
    if (hook) hook(done);
    if (reply.text) {
      d->send(request.reply(reply.code, *reply.text, watching ? "application/json" : "text/plain"));
    } else {
      d->send(request.reply(reply.code, reply.body.dump(), "application/json"));
    }
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

void FakeApiServer::changed(const std::string& type, const std::string& path, const json& object) {
  history_.push_back({version_, type, path, object});
  changes_.notify_all();
}

void FakeApiServer::put(const std::string& path, json object) {
  std::lock_guard lock(mu_);
  stamp(object);
  const bool had = objects_.contains(path);
  objects_[path] = object;
  changed(had ? "MODIFIED" : "ADDED", path, object);
}

bool FakeApiServer::remove(const std::string& path) {
  std::lock_guard lock(mu_);
  auto it = objects_.find(path);
  if (it == objects_.end()) return false;
  json gone = std::move(it->second);
  objects_.erase(it);
  stamp(gone);
  changed("DELETED", path, gone);
  return true;
}

std::optional<json> FakeApiServer::object(const std::string& path) const {
  std::lock_guard lock(mu_);
  auto it = objects_.find(path);
  if (it == objects_.end()) return std::nullopt;
  return it->second;
}

void FakeApiServer::putLog(const std::string& podPath, const std::string& container, std::string text, bool previous) {
  std::lock_guard lock(mu_);
  logs_[podPath + "/log?container=" + container + (previous ? "&previous" : "")] = std::move(text);
}

void FakeApiServer::compact() {
  {
    std::lock_guard lock(mu_);
    history_.clear();
    compactedAt_ = ++version_;  // a version of its own, so that every watch open now is older
  }
  changes_.notify_all();
}

void FakeApiServer::fail(const std::string& method, const std::string& path, int code, const std::string& reason,
                         int times, const std::string& message, std::function<bool(const json&)> when) {
  std::lock_guard lock(mu_);
  failures_.push_back({method, path, reason, message, code, times, std::move(when)});
}

void FakeApiServer::delay(const std::string& path, std::chrono::milliseconds by) {
  std::lock_guard lock(mu_);
  delays_[path] = by;
}

void FakeApiServer::servesOnly(std::vector<std::string> prefixes) {
  std::lock_guard lock(mu_);
  served_ = std::move(prefixes);
}

void FakeApiServer::onServed(std::function<void(const Served&)> hook) {
  std::lock_guard lock(mu_);
  onServed_ = std::move(hook);
}

std::vector<std::string> FakeApiServer::writes() const {
  std::lock_guard lock(mu_);
  std::vector<std::string> out;
  for (const Served& s : requests_) {
    if (s.method != methods::GET) out.push_back(s.method + " " + s.path);
  }
  return out;
}

std::vector<Served> FakeApiServer::requests() const {
  std::lock_guard lock(mu_);
  return requests_;
}

FakeApiServer::Reply FakeApiServer::watch(const std::string& path, const std::string& query) {
  const auto params = web::uri::split_query(query);
  auto param = [&](const char* k) {
    auto it = params.find(k);
    return it == params.end() ? std::string() : web::uri::decode(it->second);
  };
  std::string why;
  const auto selector = selectorOf(params, why);
  if (!selector) return {400, status(400, "BadRequest", why)};
  long long from = 0;
  int seconds = 2;  // short, so that a test's informer comes back often; the client watches again
  try {
    const std::string rv = param("resourceVersion"), timeout = param("timeoutSeconds");
    if (!rv.empty()) from = std::stoll(rv);
    if (!timeout.empty()) seconds = std::clamp(std::stoi(timeout), 1, seconds);
  } catch (const std::exception&) {
    return {400, status(400, "BadRequest", "resourceVersion and timeoutSeconds are numbers")};
  }
  std::unique_lock lock(mu_);
  if (from == 0) from = version_;  // "0" or none: from now (the fake sends no synthetic ADDED)
  std::string lines;
  auto pending = [&] {
    lines.clear();
    for (const Change& c : history_) {
      if (c.version > from && inCollection(path, c.path) && selector->selects(c.path, c.object)) {
        lines += json{{"type", c.type}, {"object", c.object}}.dump() + "\n";
      }
    }
    return !lines.empty();
  };
  changes_.wait_until(lock, std::chrono::steady_clock::now() + std::chrono::seconds(seconds),
                      [&] { return closing_ || from < compactedAt_ || pending(); });
  if (from < compactedAt_) {
    lines = json{{"type", "ERROR"},
                 {"object", status(410, "Expired",
                                   "too old resource version: " + std::to_string(from) + " (" +
                                       std::to_string(compactedAt_) + ")")}}
                .dump() +
            "\n";
  }
  return {200, json(), lines};
}

FakeApiServer::Reply FakeApiServer::serve(const std::string& method, const std::string& path, const std::string& query,
                                          const std::string& contentType, const json& input) {
  std::lock_guard lock(mu_);
  for (Failure& f : failures_) {
    if (f.times > 0 && f.method == method && f.path == path && (!f.when || f.when(input))) {
      --f.times;
      return {f.code, status(f.code, f.reason, f.message)};
    }
  }
  const auto params = web::uri::split_query(query);
  if (method == methods::GET && path.ends_with("/log")) {
    auto param = [&](const char* k) {
      auto it = params.find(k);
      return it == params.end() ? std::string() : web::uri::decode(it->second);
    };
    const std::string container = param("container");
    auto log = logs_.find(path + "?container=" + container + (param("previous") == "true" ? "&previous" : ""));
    if (log == logs_.end()) return {404, status(404, "NotFound", "no log of container \"" + container + "\"")};
    return {200, json(), log->second};
  }
  const Target target = targetOf(path);
  auto notFound = [&] {
    return Reply{404, status(404, "NotFound", resourceOf(target.object) + " \"" + pathSegments(target.object).back() +
                                                  "\" not found")};
  };
  if (method != methods::GET && method != methods::DEL && (input.is_discarded() || input.is_null())) {
    return {400, status(400, "BadRequest", "the body is not JSON")};
  }

  if (target.kind == Target::Kind::kCollection) {
    if (method == methods::GET) {
      std::string why;
      const auto selector = selectorOf(params, why);
      if (!selector) return {400, status(400, "BadRequest", why)};
      // Pages as the API server gives them (limit, then continue), the token here being
      // the next item's place rather than a snapshot's, and the version it was given at:
      // a compact() since then has expired it (410), as etcd's compaction does.
      std::size_t from = 0, limit = 0;
      long long issued = 0;
      try {
        if (auto c = params.find("continue"); c != params.end()) {
          const std::string token = web::uri::decode(c->second);
          const std::size_t dot = token.find('.');
          from = std::stoul(token.substr(0, dot));
          if (dot != std::string::npos) issued = std::stoll(token.substr(dot + 1));
          if (issued < compactedAt_) {
            return {410, status(410, "Expired",
                                "The provided continue parameter is too old to display a consistent list result. "
                                "You can start a new list without the continue parameter.")};
          }
        }
        if (auto l = params.find("limit"); l != params.end()) limit = std::stoul(l->second);
      } catch (const std::exception&) {
        return {400, status(400, "BadRequest", "limit and continue are numbers here")};
      }
      json items = json::array();
      std::size_t at = 0;
      bool more = false;
      for (const auto& [p, o] : objects_) {
        if (!inCollection(path, p) || !selector->selects(p, o) || at++ < from) continue;
        if (limit > 0 && items.size() == limit) {
          more = true;
          break;
        }
        items.push_back(o);
      }
      json metadata = {{"resourceVersion", std::to_string(version_)}};
      if (more) metadata["continue"] = std::to_string(from + items.size()) + "." + std::to_string(version_);
      return {200, {{"kind", "List"}, {"metadata", metadata}, {"items", items}}};
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
    changed("ADDED", at, object);
    return {201, object};
  }

  auto it = objects_.find(target.object);
  if (it == objects_.end()) return notFound();
  json& stored = it->second;
  if (method == methods::GET) return {200, stored};
  if (method == methods::DEL) {
    json gone = stored;
    objects_.erase(it);
    stamp(gone);
    changed("DELETED", target.object, gone);
    return {200, gone};
  }
  const std::string want = input.is_object() && input.contains("metadata") && input["metadata"].is_object()
                               ? input["metadata"].value("resourceVersion", "")
                               : "";
  if (!want.empty() && want != stored["metadata"].value("resourceVersion", "")) {
    return {409, status(409, "Conflict",
                        "Operation cannot be fulfilled on " + resourceOf(target.object) + " \"" +
                            pathSegments(target.object).back() +
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
      // A Node's status subresource writes its metadata too (the API server's node
      // status strategy keeps only the spec); here every other kind's writes only its
      // status, as a custom resource's status subresource does.
      if (resourceOf(target.object) == "nodes") onlyStatus["metadata"] = next["metadata"];
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
  changed("MODIFIED", target.object, stored);
  return {200, stored};
}

}  // namespace podshaper::fakes
