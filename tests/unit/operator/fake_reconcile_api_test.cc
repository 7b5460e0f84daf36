// The in-memory ReconcileApi the controllers' tests run against answers as the API server
// does for what they rely on: a merge patch, a Node status write that keeps the other
// conditions, a stale resourceVersion refused, a failure told to happen, a missing log or
// ShmUsage.
#include "tests/unit/operator/fake_reconcile_api.h"

#include <gtest/gtest.h>

namespace podshaper::op {
namespace {

using nlohmann::json;

TEST(FakeReconcileApi, AppliesPatchesAsTheApiServerDoes) {
  FakeReconcileApi api;
  api.putNode(nodeObject(8));
  const std::string version = api.node()["metadata"]["resourceVersion"];
  auto labelled = api.patchNode("gpu-0", {{"metadata", {{"labels", {{"podshaper.io/p2p", "all"}}}}}});
  ASSERT_TRUE(labelled);
  EXPECT_EQ(api.node()["metadata"]["labels"]["podshaper.io/p2p"], "all");
  EXPECT_EQ(api.node()["metadata"]["labels"]["kubernetes.io/hostname"], "gpu-0");  // merged, not replaced
  EXPECT_NE(api.node()["metadata"]["resourceVersion"], version);
  // A Node's status write: conditions merged by type.
  api.put(nodePath("gpu-0"), [&] {
    json n = api.node();
    n["status"]["conditions"] = {{{"type", "Ready"}, {"status", "True"}}};
    return n;
  }());
  ASSERT_TRUE(api.patchNodeStatus("gpu-0", {{"status", {{"conditions", {{{"type", "GPUTopologyValidated"},
                                                                           {"status", "True"}}}}}}}));
  EXPECT_EQ(api.node()["status"]["conditions"].size(), 2u) << api.node().dump();
  EXPECT_EQ(api.writes(), (std::vector<std::string>{"node gpu-0", "node status gpu-0"}));
}

TEST(FakeReconcileApi, RefusesAStaleVersionAndWhatItIsToldTo) {
  FakeReconcileApi api;
  api.putNode(nodeObject(8));
  auto stale = api.patchNode("gpu-0", {{"metadata", {{"resourceVersion", "1"}, {"labels", {{"a", "b"}}}}}});
  ASSERT_FALSE(stale);
  EXPECT_EQ(stale.error().code, 409);
  EXPECT_EQ(api.node()["metadata"]["labels"].count("a"), 0u);
  api.fail("PATCH", nodePath("gpu-0"), 500, "InternalError");
  auto refused = api.patchNode("gpu-0", {{"metadata", {{"labels", {{"a", "b"}}}}}});
  ASSERT_FALSE(refused);
  EXPECT_EQ(refused.error().code, 500);
  EXPECT_TRUE(api.patchNode("gpu-0", {{"metadata", {{"labels", {{"a", "b"}}}}}}));  // told once: once
  EXPECT_EQ(api.writes(), (std::vector<std::string>{"node gpu-0"}));
  auto log = api.readLog("ml", "train-0", "trainer", false);
  ASSERT_FALSE(log);
  EXPECT_TRUE(log.error().isNotFound());
  api.putLog(podPath("ml", "train-0"), "trainer", "Bus error");
  EXPECT_EQ(*api.readLog("ml", "train-0", "trainer", false), "Bus error");
}

TEST(FakeReconcileApi, ServesAShmUsageOrNotFound) {
  FakeReconcileApi api;
  EXPECT_TRUE(api.getShmUsage("ml", "train-0").error().isNotFound());
  api.put(shmUsagePath("ml", "train-0"), {{"metadata", {{"name", "train-0"}}}, {"spec", {{"podUID", "pod-uid"}}}});
  auto usage = api.getShmUsage("ml", "train-0");
  ASSERT_TRUE(usage);
  EXPECT_EQ((*usage)["spec"]["podUID"], "pod-uid");
  api.fail("GET", shmUsagePath("ml", "train-0"), 403, "Forbidden");
  EXPECT_TRUE(api.getShmUsage("ml", "train-0").error().isForbidden());
  EXPECT_EQ(api.shmUsageReads(), (std::vector<std::string>{"ml/train-0", "ml/train-0", "ml/train-0"}));
  EXPECT_TRUE(api.logReads().empty());
  EXPECT_TRUE(api.writes().empty());
}

TEST(FakeReconcileApi, MakesAShmProfileWithoutItsStatusThenPutsAndDeletesItOnItsVersion) {
  FakeReconcileApi api;
  const json object = {{"metadata", {{"name", "job.train"}, {"namespace", "ml"}}},
                       {"spec", {{"workload", "Job train"}}},
                       {"status", {{"runCount", 1}}}};
  EXPECT_TRUE(api.getShmProfile("ml", "job.train").error().isNotFound());
  auto made = api.createShmProfile("ml", object);
  ASSERT_TRUE(made);
  EXPECT_FALSE(made->contains("status"));  // the status subresource's
  EXPECT_TRUE(api.createShmProfile("ml", object).error().isConflict());  // AlreadyExists
  json stale = *made;
  stale["status"] = {{"runCount", 1}};
  ASSERT_TRUE(api.putShmProfileStatus("ml", "job.train", stale));
  EXPECT_EQ(api.getShmProfile("ml", "job.train").value()["status"]["runCount"], 1);
  EXPECT_TRUE(api.putShmProfileStatus("ml", "job.train", stale).error().isConflict());  // its version went
  EXPECT_TRUE(api.deleteShmProfile("ml", "job.train", (*made)["metadata"]["resourceVersion"]).error().isConflict());
  const std::string now = api.object(shmProfilePath("ml", "job.train")).value()["metadata"]["resourceVersion"];
  ASSERT_TRUE(api.deleteShmProfile("ml", "job.train", now));
  EXPECT_TRUE(api.deleteShmProfile("ml", "job.train", now).error().isNotFound());
  EXPECT_EQ(api.writes(), (std::vector<std::string>{"create shmprofile ml/job.train", "shmprofile status ml/job.train",
                                                    "delete shmprofile ml/job.train"}));
}

}  // namespace
}  // namespace podshaper::op

#include "operator/caches.h"
#include "tests/unit/operator/memory_cache.h"

namespace podshaper::op {
namespace {

// The in-memory cache follows the fake's objects as an informer would: keyed as the store
// keys them, kept as the transform keeps them, and only what changed is told.
TEST(MemoryCache, FollowsObjectsAsAnInformerDoes) {
  FakeReconcileApi api;
  json node = nodeObject(8);
  node["metadata"]["managedFields"] = {{{"manager", "kubelet"}}};
  api.putNode(node);
  MemoryCache nodes(compactNode);
  EXPECT_EQ(nodes.follow(api.objectsUnder(nodePath(""))), (std::vector<std::string>{"gpu-0"}));
  EXPECT_EQ(nodes.follow(api.objectsUnder(nodePath(""))), std::vector<std::string>{});  // nothing changed
  ASSERT_TRUE(nodes.get("gpu-0"));
  EXPECT_FALSE((*nodes.get("gpu-0"))["metadata"].contains("managedFields"));  // compacted
  api.remove(nodePath("gpu-0"));
  EXPECT_EQ(nodes.follow(api.objectsUnder(nodePath(""))), (std::vector<std::string>{"gpu-0"}));
  EXPECT_EQ(nodes.size(), 0u);
}

}  // namespace
}  // namespace podshaper::op
