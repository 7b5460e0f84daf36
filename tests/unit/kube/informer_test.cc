// The Informer's store rules are tested as data in store_test.cc; here, its
// life cycle without an API server: it never claims to be synced, and stop()
// is prompt whether the informer is blocked in a request or backing off; and, on the
// shared fake API server, a packed store with a transform.
#include "kube/informer.h"

#include <gtest/gtest.h>

#include <chrono>
#include <functional>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "tests/unit/kube/black_hole.h"
#include "tests/unit/support/eventually.h"
#include "tests/unit/support/fake_api_server.h"

namespace podshaper::kube {
namespace {

using namespace std::chrono_literals;

TEST(Informer, StopIsPromptWhileARequestHangs) {
  BlackHole hole;
  Client client(serverAt(hole.url()));
  Informer informer(client, "/api/v1/nodes");
  int changes = 0;
  informer.onChange([&] { ++changes; });
  informer.start();
  std::this_thread::sleep_for(300ms);
  EXPECT_FALSE(informer.hasSynced());
  const auto start = std::chrono::steady_clock::now();
  informer.stop();
  EXPECT_LT(std::chrono::steady_clock::now() - start, 1s);
  EXPECT_EQ(changes, 0);
  EXPECT_TRUE(informer.snapshot().empty());
}

TEST(Informer, StopIsPromptWhileBackingOff) {
  Client client(serverAt("http://127.0.0.1:1"));
  InformerOptions options;
  options.initialBackoff = 10s;
  Informer informer(client, "/api/v1/namespaces", options);
  informer.start();
  std::this_thread::sleep_for(200ms);  // the list has failed; it waits 5-10 s to retry
  EXPECT_FALSE(informer.hasSynced());
  const auto start = std::chrono::steady_clock::now();
  informer.stop();
  EXPECT_LT(std::chrono::steady_clock::now() - start, 1s);
}

TEST(Informer, DestructorStops) {
  Client client(serverAt("http://127.0.0.1:1"));
  const auto start = std::chrono::steady_clock::now();
  {
    Informer informer(client, "/api/v1/nodes");
    informer.start();
    std::this_thread::sleep_for(50ms);
  }
  EXPECT_LT(std::chrono::steady_clock::now() - start, 1s);
}

}  // namespace
}  // namespace podshaper::kube

namespace podshaper::kube {
namespace {

// A Node's kubelet rewrites its status every few minutes: what a transform drops changes
// nothing the store's readers see, and they are not told.
TEST(Informer, PackedWithATransformGivesBackWhatItKeepsAndIgnoresWhatItDrops) {
  fakes::FakeApiServer api;
  Client client(serverAt(api.url()));
  auto node = [](const std::string& name, const std::string& gpuCount, const std::string& heartbeat) {
    return nlohmann::json{{"metadata", {{"name", name}, {"uid", name}, {"labels", {{"podshaper.io/gpu-count", gpuCount}}}}},
                          {"status", {{"conditions", {{{"type", "Ready"}, {"lastHeartbeatTime", heartbeat}}}}}}};
  };
  api.put("/api/v1/nodes/a", node("a", "8", "t0"));
  api.put("/api/v1/nodes/b", node("b", "8", "t0"));
  InformerOptions options;
  options.transform = [](nlohmann::json& n) { n.erase("status"); };
  options.packed = true;
  Informer nodes(client, "/api/v1/nodes", options);
  std::mutex mu;
  std::vector<std::string> told;
  nodes.onKeys([&](const std::vector<std::string>& keys) {
    std::lock_guard lock(mu);
    told.insert(told.end(), keys.begin(), keys.end());
  });
  nodes.start();
  ASSERT_TRUE(support::eventually([&] { return nodes.hasSynced(); }));
  auto a = nodes.get("a");
  ASSERT_TRUE(a);
  EXPECT_EQ((*a)["metadata"]["labels"]["podshaper.io/gpu-count"], "8");
  EXPECT_FALSE(a->contains("status"));
  EXPECT_FALSE(resourceVersionOf(*a).empty());
  EXPECT_EQ(nodes.snapshot().size(), 2u);
  EXPECT_EQ(nodes.size(), 2u);
  {
    std::lock_guard lock(mu);
    told.clear();
  }
  api.put("/api/v1/nodes/a", node("a", "8", "t1"));  // a heartbeat: dropped by the transform
  api.put("/api/v1/nodes/b", node("b", "4", "t1"));  // a label: kept
  ASSERT_TRUE(support::eventually([&] { return (*nodes.get("b"))["metadata"]["labels"]["podshaper.io/gpu-count"] == "4"; }));
  ASSERT_TRUE(support::eventually([&] { return resourceVersionOf(*nodes.get("a")) != resourceVersionOf(*a); }));
  // onKeys runs just after the store changes, outside its lock.
  ASSERT_TRUE(support::eventually([&] {
    std::lock_guard lock(mu);
    return !told.empty();
  }));
  std::lock_guard lock(mu);
  EXPECT_EQ(told, std::vector<std::string>{"b"});
  nodes.stop();
}

}  // namespace
}  // namespace podshaper::kube

namespace podshaper::kube {
namespace {

// A watch the API server has expired (410 Gone, its history compacted) is listed again,
// and what changed meanwhile reaches the store.
TEST(Informer, AnExpiredWatchListsAgainAndMissesNothing) {
  fakes::FakeApiServer api;
  Client client(serverAt(api.url()));
  auto node = [](const std::string& gpuCount) {
    return nlohmann::json{{"metadata", {{"name", "a"}, {"uid", "a"}, {"labels", {{"podshaper.io/gpu-count", gpuCount}}}}}};
  };
  api.put("/api/v1/nodes/a", node("8"));
  Informer nodes(client, "/api/v1/nodes");
  nodes.start();
  ASSERT_TRUE(support::eventually([&] { return nodes.hasSynced(); }));
  api.compact();  // every open watch: 410, then a list
  api.put("/api/v1/nodes/a", node("4"));
  ASSERT_TRUE(support::eventually([&] { return (*nodes.get("a"))["metadata"]["labels"]["podshaper.io/gpu-count"] == "4"; }));
  int lists = 0;
  for (const fakes::Served& s : api.requests()) {
    lists += s.method == "GET" && s.path == "/api/v1/nodes" && s.query.find("watch") == std::string::npos;
  }
  EXPECT_GE(lists, 2);
}

}  // namespace
}  // namespace podshaper::kube
