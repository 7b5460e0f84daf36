#include "api/report.h"

#include <gtest/gtest.h>

namespace podshaper {
namespace {

using nlohmann::json;

TEST(Report, SpecAndOwner) {
  Topology t;
  t.gpus.push_back(GpuInfo{});
  json spec = reportSpec(t, "2026-11-22T00:00:00Z");
  EXPECT_EQ(spec["observedAt"], "2026-11-22T00:00:00Z");
  EXPECT_EQ(spec["gpus"].size(), 1u);
  json r = newReport("gpu-1", "uid-1", spec);
  EXPECT_EQ(r["kind"], "GPUTopologyReport");
  EXPECT_EQ(r["metadata"]["name"], "gpu-1");
  EXPECT_EQ(r["metadata"]["ownerReferences"][0]["kind"], "Node");
  EXPECT_EQ(r["metadata"]["ownerReferences"][0]["uid"], "uid-1");
}

TEST(Report, ObservedAtAloneIsNoChange) {
  json a = {{"gpus", json::array()}, {"observedAt", "2026-11-22T00:00:00Z"}};
  json b = {{"gpus", json::array()}, {"observedAt", "2026-11-22T00:05:00Z"}};
  EXPECT_TRUE(sameMeasurement(a, b));
  b["gpus"].push_back(1);
  EXPECT_FALSE(sameMeasurement(a, b));
}

TEST(Report, HeartbeatFromTheStoredObservedAt) {
  json spec = {{"observedAt", "2026-11-22T00:00:00Z"}};
  const long long at = 1795305600;  // 2026-11-22T00:00:00Z
  EXPECT_FALSE(heartbeatDue(spec, at + 299, 300));
  EXPECT_TRUE(heartbeatDue(spec, at + 300, 300));
  EXPECT_TRUE(heartbeatDue(json::object(), at, 300));
  EXPECT_TRUE(heartbeatDue({{"observedAt", "yesterday"}}, at, 300));
}

}  // namespace
}  // namespace podshaper
