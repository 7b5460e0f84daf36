#include "judging/events.h"

#include <gtest/gtest.h>

namespace podshaper {
namespace {

TEST(EventObject, AboutAClusterScopedObject) {
  ObjectRef report{"podshaper.io/v1alpha1", "GPUTopologyReport", "gpu-0", "uid-1"};
  auto e = eventObject(report, {"Warning", "P2PUnavailable", "no P2P"}, "default", "op-a", 1795305600123456LL, 7);
  EXPECT_EQ(e["kind"], "Event");
  EXPECT_EQ(e["metadata"]["namespace"], "default");
  EXPECT_EQ(e["metadata"]["name"].get<std::string>().rfind("gpu-0.", 0), 0u);
  EXPECT_EQ(e["involvedObject"]["kind"], "GPUTopologyReport");
  EXPECT_EQ(e["involvedObject"]["uid"], "uid-1");
  EXPECT_FALSE(e["involvedObject"].contains("namespace"));  // kubectl describe searches with an empty one
  EXPECT_EQ(e["type"], "Warning");
  EXPECT_EQ(e["reason"], "P2PUnavailable");
  EXPECT_EQ(e["firstTimestamp"], "2026-11-22T00:00:00Z");
  EXPECT_EQ(e["source"]["component"], "podshaper-operator");
  EXPECT_EQ(e["reportingInstance"], "op-a");
  // Names differ for events in the same microsecond.
  EXPECT_NE(e["metadata"]["name"],
            eventObject(report, {"Normal", "X", "y"}, "default", "op-a", 1795305600123456LL, 8)["metadata"]["name"]);
}

TEST(EventObject, LongMessagesAreCutOnACharacterBoundary) {
  std::string message(1020, 'a');
  message += "ééééé";  // 2 bytes each, crossing the cut
  auto e = eventObject({"v1", "Node", "n", "u"}, {"Normal", "R", message}, "default", "op", 0, 0);
  const std::string cut = e["message"].get<std::string>();
  EXPECT_LE(cut.size(), 1024u);
  EXPECT_EQ(cut.substr(cut.size() - 3), "...");
  EXPECT_NO_THROW((void)nlohmann::json(cut).dump());
}

}  // namespace
}  // namespace podshaper
