// The agent's writes of its node's GPUTopologyReport, through the real client to the
// shared fake API server: what planReportWrite decides, done, and what a failure says.
#include <gtest/gtest.h>

#include "agent/run.h"
#include "api/names.h"
#include "kube/protocol.h"
#include "tests/unit/judging/verdict_builder.h"
#include "tests/unit/kube/black_hole.h"
#include "tests/unit/support/fake_api_server.h"

namespace podshaper::agent {
namespace {

using nlohmann::json;

const std::string kReport = kube::resourcePath(names::kGroupVersion, names::kReportResource, "", "gpu-0");
const std::string kNode = kube::resourcePath("v1", "nodes", "", "gpu-0");
constexpr long long kHeartbeat = 300;

class WriteReportTest : public ::testing::Test {
 protected:
  fakes::FakeApiServer api;
  kube::Client client{kube::serverAt(api.url())};

  Result<std::string> write(const TopologyBuilder& topology, long long at) {
    return writeReport(client, "gpu-0", topology.spec(at), at, kHeartbeat);
  }
  // The word, or the error's message.
  std::string said(const TopologyBuilder& topology, long long at) {
    auto r = write(topology, at);
    return r ? *r : "failed: " + r.error().message;
  }
};

TEST_F(WriteReportTest, CreatedOwnedByItsNodeThenWrittenOnlyWhenChangedOrDue) {
  api.put(kNode, {{"metadata", {{"name", "gpu-0"}, {"uid", "node-uid"}}}});
  auto created = write(TopologyBuilder(8), kNow);
  ASSERT_TRUE(created) << created.error().message;
  EXPECT_EQ(*created, "created");
  const json report = *api.object(kReport);
  EXPECT_EQ(report["metadata"]["ownerReferences"][0]["uid"], "node-uid");
  EXPECT_EQ(report["metadata"]["ownerReferences"][0]["kind"], "Node");
  EXPECT_EQ(report["spec"], TopologyBuilder(8).spec(kNow));

  EXPECT_EQ(said(TopologyBuilder(8), kNow + 60), "unchanged");
  EXPECT_EQ(said(TopologyBuilder(8), kNow + kHeartbeat + 1), "heartbeat");
  EXPECT_EQ((*api.object(kReport))["spec"], TopologyBuilder(8).spec(kNow + kHeartbeat + 1));
  EXPECT_EQ(said(TopologyBuilder(8).pair(2, 5, "NV18", "NS"), kNow + kHeartbeat + 10), "updated");
  EXPECT_EQ(api.writes(), (std::vector<std::string>{
                              "POST " + kube::resourcePath(names::kGroupVersion, names::kReportResource),
                              "PUT " + kReport,
                              "PUT " + kReport,
                          }));
}

TEST_F(WriteReportTest, AReportWrittenBetweenTheReadAndTheWriteIsAConflictThenRead) {
  api.put(kNode, {{"metadata", {{"name", "gpu-0"}, {"uid", "node-uid"}}}});
  ASSERT_TRUE(write(TopologyBuilder(8), kNow));
  bool once = true;
  api.onServed([&](const fakes::Served& s) {
    if (s.method != "GET" || s.path != kReport || !once) return;
    once = false;
    json edited = *api.object(kReport);  // someone else's write, right after the agent read
    edited["metadata"]["labels"]["edited"] = "yes";
    api.put(kReport, edited);
  });
  auto refused = write(TopologyBuilder(8).pair(0, 1, "NV18", "NS"), kNow + 10);
  ASSERT_FALSE(refused);
  EXPECT_EQ(refused.error().message.rfind("update: ", 0), 0u) << refused.error().message;
  EXPECT_NE(refused.error().message.find("the object has been modified"), std::string::npos);
  EXPECT_EQ(said(TopologyBuilder(8).pair(0, 1, "NV18", "NS"), kNow + 20), "updated");
  EXPECT_EQ((*api.object(kReport))["metadata"]["labels"]["edited"], "yes");  // theirs kept
}

TEST_F(WriteReportTest, FailuresSayWhatFailedAndWriteNothing) {
  auto noNode = write(TopologyBuilder(8), kNow);
  ASSERT_FALSE(noNode);
  EXPECT_EQ(noNode.error().message.rfind("Node gpu-0: ", 0), 0u) << noNode.error().message;
  EXPECT_NE(noNode.error().message.find("not found"), std::string::npos) << noNode.error().message;

  api.put(kNode, {{"metadata", {{"name", "gpu-0"}, {"uid", "node-uid"}}}});
  api.fail("GET", kReport, 500, "InternalError", 1, "etcd is slow");
  auto unread = write(TopologyBuilder(8), kNow);
  ASSERT_FALSE(unread);
  EXPECT_EQ(unread.error().message.rfind("get: ", 0), 0u) << unread.error().message;
  EXPECT_NE(unread.error().message.find("etcd is slow"), std::string::npos);

  api.fail("POST", kube::resourcePath(names::kGroupVersion, names::kReportResource), 403, "Forbidden");
  auto refused = write(TopologyBuilder(8), kNow);
  ASSERT_FALSE(refused);
  EXPECT_EQ(refused.error().message.rfind("create: ", 0), 0u) << refused.error().message;
  EXPECT_FALSE(api.object(kReport));
  EXPECT_EQ(said(TopologyBuilder(8), kNow), "created");
}

}  // namespace
}  // namespace podshaper::agent
