#pragma once

// The API server's behaviour over objects held in memory, served over HTTP on loopback
// to the real kube::Client, for unit tests that need an API server but no cluster:
// GET of an object or a collection (a namespaced resource's across namespaces too),
// POST (create: 409 AlreadyExists), PUT (replace: 409 Conflict on a stale
// resourceVersion, 404 when missing), PATCH (merge, strategic merge, JSON patch),
// DELETE, the status subresource, a pod's log; every write a new resourceVersion; a
// collection's GET takes fieldSelector metadata.name=NAME and equality labelSelectors.
// A watch (GET ?watch=1) answers the changes after its resourceVersion, waiting up to
// two seconds for the first, then ends as a watch whose timeout passed does; one from
// before the last compact() gets the 410 ERROR event, and a list's continue token from
// before it a 410. Answers are Kubernetes Status objects, as the API server's.
#include <chrono>
#include <condition_variable>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace podshaper::fakes {

// A loopback TCP port free now (bound, read and closed again).
int freeLoopbackPort();

// A path's segments: "/api/v1/nodes/a" → api, v1, nodes, a.
std::vector<std::string> pathSegments(const std::string& path);

// A strategic merge patch as the API server applies one to a status: a merge patch, with
// status.conditions merged by type (an entry with "$patch" removes that type).
void strategicMerge(nlohmann::json& object, const nlohmann::json& patch);

// One request as the server answered it.
struct Served {
  std::string method, path, query;  // the query as sent (still URL-encoded)
  std::map<std::string, std::string> params;  // the query, decoded
  int code = 0;
  nlohmann::json body;  // the request's body (null for none)
};

class FakeApiServer {
 public:
  FakeApiServer();
  ~FakeApiServer();
  FakeApiServer(const FakeApiServer&) = delete;
  FakeApiServer& operator=(const FakeApiServer&) = delete;

  // The first door's URL. Several doors lead to the same objects, so that one client
  // can be cut off (every answer a 503) while another still reaches them.
  std::string url(int door = 0) const;
  int openDoor();
  void cut(int door, bool cut);

  // Stores an object at its path ("/api/v1/namespaces/ns/secrets/name") as an admin's
  // write would: a new resourceVersion (and a uid when it has none).
  void put(const std::string& path, nlohmann::json object);
  // Deletes it as an admin would (kubectl delete); false when there was none.
  bool remove(const std::string& path);
  // The object at that path as the server holds it, if any.
  std::optional<nlohmann::json> object(const std::string& path) const;
  // What GET <pod path>/log?container=C[&previous=true] answers (text); unset: 404.
  void putLog(const std::string& podPath, const std::string& container, std::string text, bool previous = false);
  // Forgets the changes so far, as etcd's compaction does: a watch from any resourceVersion
  // before now (every one open now included) ends with 410 Expired, and its client lists again.
  void compact();

  // The next `times` requests of `method` ("PUT") on `path` answer `code` with a Status;
  // with `when`, only those whose body it accepts (the others are served).
  void fail(const std::string& method, const std::string& path, int code, const std::string& reason,
            int times = 1, const std::string& message = "refused by the test",
            std::function<bool(const nlohmann::json& body)> when = {});
  // Requests of `path` are answered `by` later (outside the server's lock: others go on).
  void delay(const std::string& path, std::chrono::milliseconds by);
  // Only paths under these prefixes are served; others get the API server's answer for a
  // group or version it does not serve: 404 "404 page not found", no Status.
  void servesOnly(std::vector<std::string> prefixes);
  // Called with each request once it is served and before its answer is sent (on the
  // server's thread, outside its lock): what a test does there happens "during" the call.
  void onServed(std::function<void(const Served&)> hook);
  // The writes served, in order: "PUT /api/v1/namespaces/ns/secrets/name" (failed ones too).
  std::vector<std::string> writes() const;
  // Every request served, watches included, in order.
  std::vector<Served> requests() const;

 private:
  struct Reply {
    int code;
    nlohmann::json body;
    std::optional<std::string> text = std::nullopt;  // a text answer (a log, a watch's lines) instead of body
  };
  struct Change {
    long long version;
    std::string type;  // ADDED, MODIFIED, DELETED
    std::string path;
    nlohmann::json object;
  };
  Reply serve(const std::string& method, const std::string& path, const std::string& query,
              const std::string& contentType, const nlohmann::json& input);
  Reply watch(const std::string& path, const std::string& query);
  void stamp(nlohmann::json& object);
  // Records a change for the watches (with mu_ held) and wakes them.
  void changed(const std::string& type, const std::string& path, const nlohmann::json& object);

  mutable std::mutex mu_;
  std::condition_variable changes_;
  bool closing_ = false;
  std::map<std::string, nlohmann::json> objects_;
  std::map<std::string, std::string> logs_;
  std::vector<Change> history_;
  long long compactedAt_ = 0;
  struct Failure {
    std::string method, path, reason, message;
    int code, times;
    std::function<bool(const nlohmann::json&)> when;
  };
  std::vector<Failure> failures_;
  std::map<std::string, std::chrono::milliseconds> delays_;
  std::vector<std::string> served_;
  std::vector<Served> requests_;
  std::function<void(const Served&)> onServed_;
  long long version_ = 1000;
  struct Door;  // a cpprest listener, kept out of this header (its U() macro breaks gtest)
  std::vector<std::unique_ptr<Door>> doors_;
};

}  // namespace podshaper::fakes
