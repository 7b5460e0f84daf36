// The fake API server answers the real kube::Client as the API server does: what the
// unit tests built on it may rely on.
#include "tests/unit/support/fake_api_server.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <thread>

#include "kube/client.h"
#include "kube/informer.h"
#include "tests/unit/kube/black_hole.h"
#include "tests/unit/support/eventually.h"

namespace podshaper::fakes {
namespace {

using nlohmann::json;

constexpr const char* kSecrets = "/api/v1/namespaces/ns/secrets";

json secret(const std::string& name) {
  return {{"apiVersion", "v1"}, {"kind", "Secret"}, {"metadata", {{"name", name}, {"namespace", "ns"}}},
          {"data", {{"a", "YQ=="}}}};
}

TEST(FakeApiServer, CreateGetReplaceWithResourceVersionsConflictsAndNotFound) {
  FakeApiServer api;
  kube::Client client(kube::serverAt(api.url()));
  auto missing = client.get(std::string(kSecrets) + "/s");
  ASSERT_FALSE(missing);
  EXPECT_TRUE(missing.error().isNotFound()) << missing.error().message;

  auto created = client.create(kSecrets, secret("s"));
  ASSERT_TRUE(created) << created.error().message;
  const std::string rv = (*created)["metadata"]["resourceVersion"];
  auto again = client.create(kSecrets, secret("s"));
  ASSERT_FALSE(again);
  EXPECT_EQ(again.error().code, 409);
  EXPECT_EQ(again.error().reason, "AlreadyExists");

  json changed = *created;
  changed["data"]["a"] = "Yg==";
  auto replaced = client.replace(std::string(kSecrets) + "/s", changed);
  ASSERT_TRUE(replaced) << replaced.error().message;
  EXPECT_NE((*replaced)["metadata"]["resourceVersion"], rv);
  auto stale = client.replace(std::string(kSecrets) + "/s", changed);  // still carries the old version
  ASSERT_FALSE(stale);
  EXPECT_TRUE(stale.error().isConflict()) << stale.error().message;
  EXPECT_EQ(api.object(std::string(kSecrets) + "/s")->at("data")["a"], "Yg==");

  auto list = client.get(kSecrets);
  ASSERT_TRUE(list);
  EXPECT_EQ((*list)["items"].size(), 1u);
  EXPECT_EQ(api.writes(), (std::vector<std::string>{"POST /api/v1/namespaces/ns/secrets",
                                                     "POST /api/v1/namespaces/ns/secrets",
                                                     "PUT /api/v1/namespaces/ns/secrets/s",
                                                     "PUT /api/v1/namespaces/ns/secrets/s"}));
}

TEST(FakeApiServer, PatchesAndTheStatusSubresource) {
  FakeApiServer api;
  kube::Client client(kube::serverAt(api.url()));
  api.put("/api/v1/nodes/n", {{"metadata", {{"name", "n"}, {"labels", {{"a", "1"}}}}},
                              {"status", {{"conditions", {{{"type", "Ready"}, {"status", "True"}}}}}}});
  auto merged = client.patch("/api/v1/nodes/n", {{"metadata", {{"labels", {{"b", "2"}}}}}, {"status", nullptr}},
                             kube::PatchType::Merge);
  ASSERT_TRUE(merged) << merged.error().message;
  EXPECT_EQ((*merged)["metadata"]["labels"], json({{"a", "1"}, {"b", "2"}}));
  auto status = client.patchStatus(
      "/api/v1/nodes/n", {{"status", {{"conditions", {{{"type", "Other"}, {"status", "False"}}}}}}},
      kube::PatchType::StrategicMerge);
  ASSERT_TRUE(status) << status.error().message;
  EXPECT_EQ((*status)["status"]["conditions"].size(), 2u);  // merged by type: Ready stays
  EXPECT_EQ((*status)["metadata"]["labels"].size(), 2u);
}

TEST(FakeApiServer, AFailureATestAsksForIsAnsweredOnceAsAStatus) {
  FakeApiServer api;
  kube::Client client(kube::serverAt(api.url()));
  api.put(std::string(kSecrets) + "/s", secret("s"));
  api.fail("GET", std::string(kSecrets) + "/s", 403, "Forbidden");
  auto refused = client.get(std::string(kSecrets) + "/s");
  ASSERT_FALSE(refused);
  EXPECT_EQ(refused.error().code, 403);
  EXPECT_TRUE(client.get(std::string(kSecrets) + "/s"));
}

json pod(const std::string& name, const std::string& ns, json labels) {
  return {{"metadata", {{"name", name}, {"namespace", ns}, {"labels", std::move(labels)}}}};
}

std::vector<std::string> watched(const kube::Client& client, const std::string& path, const std::string& from,
                                 const std::string& labelSelector, kube::WatchStatus& status) {
  std::vector<std::string> seen;
  std::atomic<bool> stop{false};
  kube::WatchOptions options;
  options.labelSelector = labelSelector;
  status = client.watch(
      path, from,
      [&](const kube::WatchEvent& e) {
        seen.push_back(e.type + " " + e.object["metadata"]["name"].get<std::string>());
        return true;
      },
      stop, options);
  return seen;
}

TEST(FakeApiServer, AWatchSeesTheChangesAfterItsVersionAcrossNamespacesThenA410OnceCompacted) {
  FakeApiServer api;
  kube::Client client(kube::serverAt(api.url()));
  api.put("/api/v1/namespaces/a/pods/p", pod("p", "a", {{"shaped", "true"}}));
  api.put("/api/v1/namespaces/b/pods/o", pod("o", "b", json::object()));
  auto list = client.list("/api/v1/pods", "shaped=true");
  ASSERT_TRUE(list) << list.error().message;
  ASSERT_EQ((*list)["items"].size(), 1u);
  const std::string from = (*list)["metadata"]["resourceVersion"];

  api.put("/api/v1/namespaces/b/pods/q", pod("q", "b", {{"shaped", "true"}}));
  api.put("/api/v1/namespaces/b/pods/r", pod("r", "b", {{"shaped", "false"}}));  // not selected
  EXPECT_TRUE(api.remove("/api/v1/namespaces/a/pods/p"));
  EXPECT_FALSE(api.remove("/api/v1/namespaces/a/pods/p"));
  kube::WatchStatus status;
  EXPECT_EQ(watched(client, "/api/v1/namespaces/b/pods", from, "", status),
            (std::vector<std::string>{"ADDED q", "ADDED r"}));
  EXPECT_EQ(watched(client, "/api/v1/pods", from, "shaped=true", status),
            (std::vector<std::string>{"ADDED q", "DELETED p"}));
  EXPECT_EQ(status.end, kube::WatchEnd::Closed);

  // Nothing new: the watch waits, then ends as one whose timeout passed.
  const auto start = std::chrono::steady_clock::now();
  EXPECT_TRUE(watched(client, "/api/v1/pods", status.resourceVersion, "", status).empty());
  EXPECT_EQ(status.end, kube::WatchEnd::Closed);
  EXPECT_GE(std::chrono::steady_clock::now() - start, std::chrono::seconds(1));

  api.compact();
  EXPECT_TRUE(watched(client, "/api/v1/pods", from, "", status).empty());
  EXPECT_EQ(status.end, kube::WatchEnd::Gone);
  EXPECT_EQ(status.error.code, 410);
  auto bad = client.list("/api/v1/pods", "shaped in (true)");
  ASSERT_FALSE(bad);
  EXPECT_EQ(bad.error().code, 400);
}

// A list comes in pages of about listPageBytes of text: the first of kFirstListPage
// items, then as many as fit at the size the last page's items had; every item once, in order.
TEST(FakeApiServer, AListComesInPagesOfAboutListPageBytes) {
  FakeApiServer api;
  for (int i = 0; i < 120; ++i) {
    char name[16];
    std::snprintf(name, sizeof name, "p%03d", i);
    json p = pod(name, "a", json::object());
    p["metadata"]["annotations"]["pad"] = std::string(1000, 'x');  // about 1.1 KB each
    api.put(std::string("/api/v1/namespaces/a/pods/") + name, p);
  }
  auto limits = [&](const kube::ClientOptions& options) {
    kube::Client client(kube::serverAt(api.url()), options);
    const std::size_t before = api.requests().size();
    auto list = client.list("/api/v1/pods");
    EXPECT_TRUE(list) << list.error().message;
    std::vector<std::string> names;
    for (const auto& item : (*list)["items"]) names.push_back(item["metadata"]["name"]);
    EXPECT_EQ(names.size(), 120u);
    EXPECT_TRUE(std::is_sorted(names.begin(), names.end()));
    EXPECT_EQ(std::adjacent_find(names.begin(), names.end()), names.end());
    std::vector<std::string> asked;
    const auto served = api.requests();
    for (std::size_t i = before; i < served.size(); ++i) asked.push_back(served[i].params.at("limit"));
    return asked;
  };
  kube::ClientOptions options;
  options.listPageBytes = 11000;  // about ten of these pods: 50, then 8 pages of 9 (the last holding 7)
  EXPECT_EQ(limits(options), (std::vector<std::string>{"50", "9", "9", "9", "9", "9", "9", "9", "9"}));
  options.listPageBytes = 0;  // pages of listPageSize
  EXPECT_EQ(limits(options), (std::vector<std::string>{"500"}));
  options.listPageSize = 40;  // the first page is never more than listPageSize
  options.listPageBytes = 1 << 20;
  EXPECT_EQ(limits(options), (std::vector<std::string>{"40", "40", "40"}));
}

// A list is the first page's resourceVersion and every page's items; when a compaction
// expires its continue token midway (410), it is listed again in one request.
TEST(FakeApiServer, AListKeepsItsFirstPagesVersionAndListsAgainWhenItsTokenExpired) {
  FakeApiServer api;
  for (int i = 0; i < 30; ++i) {
    const std::string name = "p" + std::to_string(100 + i);
    api.put("/api/v1/namespaces/a/pods/" + name, pod(name, "a", json::object()));
  }
  kube::ClientOptions options;
  options.listPageBytes = 0;
  options.listPageSize = 10;
  kube::Client client(kube::serverAt(api.url()), options);
  std::atomic<int> pages{0};
  std::atomic<bool> compactAfterSecond{false};
  api.onServed([&](const Served& s) {
    if (s.path != "/api/v1/pods") return;
    ++pages;
    // Between pages the cluster moves on (a Node written), or is compacted and a pod added.
    if (pages == 1) api.put("/api/v1/nodes/n", {{"metadata", {{"name", "n"}}}});
    if (pages == 2 && compactAfterSecond) {
      api.compact();
      api.put("/api/v1/namespaces/a/pods/p200", pod("p200", "a", json::object()));
    }
  });
  // Each list request since `from`: its limit ("-": none), whether it continued, its answer.
  auto asked = [&](std::size_t from) {
    std::vector<std::string> out;
    const auto served = api.requests();
    for (std::size_t i = from; i < served.size(); ++i) {
      const Served& s = served[i];
      out.push_back((s.params.contains("limit") ? s.params.at("limit") : "-") +
                    (s.params.contains("continue") ? " continue " : " ") + std::to_string(s.code));
    }
    return out;
  };

  auto list = client.list("/api/v1/pods");
  ASSERT_TRUE(list) << list.error().message;
  EXPECT_EQ((*list)["items"].size(), 30u);
  EXPECT_EQ((*list)["kind"], "List");
  EXPECT_EQ(asked(0), (std::vector<std::string>{"10 200", "10 continue 200", "10 continue 200"}));
  // The first page's version, not the later pages' (the Node was written after it).
  const std::string listed = (*list)["metadata"]["resourceVersion"];
  const std::string node = api.object("/api/v1/nodes/n")->at("metadata").at("resourceVersion");
  EXPECT_LT(std::stoul(listed), std::stoul(node));

  pages = 0;
  compactAfterSecond = true;
  const std::size_t before = api.requests().size();
  auto again = client.list("/api/v1/pods");
  ASSERT_TRUE(again) << again.error().message;
  std::vector<std::string> names;
  for (const auto& item : (*again)["items"]) names.push_back(item["metadata"]["name"]);
  EXPECT_EQ(names.size(), 31u);  // every pod once, the one added during the list too
  EXPECT_TRUE(std::is_sorted(names.begin(), names.end()));
  EXPECT_EQ(std::adjacent_find(names.begin(), names.end()), names.end());
  EXPECT_EQ(asked(before), (std::vector<std::string>{"10 200", "10 continue 200", "10 continue 410", "- 200"}));
  EXPECT_GE(std::stoul((*again)["metadata"]["resourceVersion"].get<std::string>()), std::stoul(node));
}

TEST(FakeApiServer, AnInformerFollowsTheChangesAndListsAgainAfterCompaction) {
  FakeApiServer api;
  kube::Client client(kube::serverAt(api.url()));
  api.put("/api/v1/nodes/a", {{"metadata", {{"name", "a"}}}});
  kube::Informer nodes(client, "/api/v1/nodes");
  nodes.start();
  ASSERT_TRUE(support::eventually([&] { return nodes.hasSynced(); }));
  api.put("/api/v1/nodes/b", {{"metadata", {{"name", "b"}}}});
  EXPECT_TRUE(support::eventually([&] { return nodes.get("b").has_value(); }));
  api.compact();  // the open watch started before: 410, then a list
  api.put("/api/v1/nodes/c", {{"metadata", {{"name", "c"}}}});
  api.remove("/api/v1/nodes/a");
  EXPECT_TRUE(support::eventually([&] { return nodes.get("c").has_value() && !nodes.get("a"); }));
  int lists = 0;
  for (const Served& s : api.requests()) lists += s.method == "GET" && s.query.find("watch") == std::string::npos;
  EXPECT_EQ(lists, 2);
  nodes.stop();
}

TEST(FakeApiServer, APodsLogAndAFailureForSomeBodiesOnly) {
  FakeApiServer api;
  kube::Client client(kube::serverAt(api.url()));
  api.putLog("/api/v1/namespaces/ml/pods/p", "c", "Bus error\n", /*previous=*/true);
  auto log = client.getText("/api/v1/namespaces/ml/pods/p/log?container=c&previous=true");
  ASSERT_TRUE(log) << log.error().message;
  EXPECT_EQ(*log, "Bus error\n");
  auto current = client.getText("/api/v1/namespaces/ml/pods/p/log?container=c");
  ASSERT_FALSE(current);
  EXPECT_EQ(current.error().code, 404);

  api.fail("POST", "/api/v1/namespaces/ml/events", 500, "InternalError", 1, "etcd is slow",
           [](const json& e) { return e["reason"] == "B"; });
  auto event = [](const char* reason) { return json{{"metadata", {{"generateName", "e."}}}, {"reason", reason}}; };
  EXPECT_TRUE(client.create("/api/v1/namespaces/ml/events", event("A")));
  EXPECT_FALSE(client.create("/api/v1/namespaces/ml/events", event("B")));  // refused once
  EXPECT_TRUE(client.create("/api/v1/namespaces/ml/events", event("B")));
  std::vector<int> codes;
  for (const Served& s : api.requests()) codes.push_back(s.code);
  EXPECT_EQ(codes, (std::vector<int>{200, 404, 201, 500, 201}));
}

}  // namespace
}  // namespace podshaper::fakes
