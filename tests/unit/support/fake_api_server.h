#pragma once

// The API server's behaviour over objects held in memory, served over HTTP on loopback
// to the real kube::Client, for unit tests that need an API server but no cluster:
// GET of an object or a collection, POST (create: 409 AlreadyExists), PUT (replace:
// 409 Conflict on a stale resourceVersion, 404 when missing), PATCH (merge, strategic
// merge, JSON patch), DELETE, the status subresource; every write a new
// resourceVersion; a collection's GET takes fieldSelector metadata.name=NAME. Answers are
// Kubernetes Status objects, as the API server's.
#include <chrono>
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
  // The object at that path as the server holds it, if any.
  std::optional<nlohmann::json> object(const std::string& path) const;

  // The next `times` requests of `method` ("PUT") on `path` answer `code` with a Status.
  void fail(const std::string& method, const std::string& path, int code, const std::string& reason,
            int times = 1, const std::string& message = "refused by the test");
  // Requests of `path` are answered `by` later (outside the server's lock: others go on).
  void delay(const std::string& path, std::chrono::milliseconds by);
  // Only paths under these prefixes are served; others get the API server's answer for a
  // group or version it does not serve: 404 "404 page not found", no Status.
  void servesOnly(std::vector<std::string> prefixes);
  // The writes served, in order: "PUT /api/v1/namespaces/ns/secrets/name" (failed ones too).
  std::vector<std::string> writes() const;

 private:
  struct Reply {
    int code;
    nlohmann::json body;
  };
  Reply serve(const std::string& method, const std::string& path, const std::string& query,
              const std::string& contentType, const std::string& body);
  void stamp(nlohmann::json& object);

  mutable std::mutex mu_;
  std::map<std::string, nlohmann::json> objects_;
  struct Failure {
    std::string method, path, reason, message;
    int code, times;
  };
  std::vector<Failure> failures_;
  std::map<std::string, std::chrono::milliseconds> delays_;
  std::vector<std::string> served_;
  std::vector<std::string> writes_;
  long long version_ = 1000;
  struct Door;  // a cpprest listener, kept out of this header (its U() macro breaks gtest)
  std::vector<std::unique_ptr<Door>> doors_;
};

}  // namespace podshaper::fakes
