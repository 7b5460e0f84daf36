// The fake API server answers the real kube::Client as the API server does: what the
// unit tests built on it may rely on.
#include "tests/unit/support/fake_api_server.h"

#include <gtest/gtest.h>

#include "kube/client.h"
#include "tests/unit/kube/black_hole.h"

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

}  // namespace
}  // namespace podshaper::fakes
