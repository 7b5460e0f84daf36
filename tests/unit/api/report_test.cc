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

TEST(ReportWrite, CreateUpdateHeartbeatOrNothing) {
  const long long at = 1795305600;  // 2026-11-22T00:00:00Z
  json spec = {{"gpus", json::array({1})}, {"observedAt", "2026-11-22T00:04:00Z"}};
  json stored = {{"metadata", {{"name", "gpu-1"}, {"resourceVersion", "7"}}},
                 {"spec", {{"gpus", json::array({1})}, {"observedAt", "2026-11-22T00:00:00Z"}}},
                 {"status", {{"conditions", json::array()}}}};

  EXPECT_EQ(planReportWrite(std::nullopt, spec, at + 240, 300).kind, ReportWrite::Kind::kCreate);

  ReportWrite same = planReportWrite(stored, spec, at + 240, 300);
  EXPECT_EQ(same.kind, ReportWrite::Kind::kUnchanged);
  EXPECT_TRUE(same.replacement.is_null());

  ReportWrite heartbeat = planReportWrite(stored, spec, at + 300, 300);
  EXPECT_EQ(heartbeat.kind, ReportWrite::Kind::kHeartbeat);
  EXPECT_EQ(heartbeat.replacement["spec"], spec);
  EXPECT_EQ(heartbeat.replacement["metadata"]["resourceVersion"], "7");  // the precondition
  EXPECT_EQ(heartbeat.replacement["status"], stored["status"]);          // the operator's, put back as read

  json changed = spec;
  changed["gpus"].push_back(2);
  ReportWrite update = planReportWrite(stored, changed, at + 10, 300);
  EXPECT_EQ(update.kind, ReportWrite::Kind::kUpdate);
  EXPECT_EQ(update.replacement["spec"], changed);

  // A spec the agent wrote with nulls ("unknown") compares equal to itself: no write.
  json withNull = {{"gpus", json::array({{{"numaNode", nullptr}}})}, {"observedAt", "2026-11-22T00:00:00Z"}};
  json storedNull = stored;
  storedNull["spec"] = withNull;
  EXPECT_EQ(planReportWrite(storedNull, withNull, at + 10, 300).kind, ReportWrite::Kind::kUnchanged);
  // A report without a spec (made by hand) is written.
  json bare = stored;
  bare.erase("spec");
  EXPECT_EQ(planReportWrite(bare, spec, at, 300).kind, ReportWrite::Kind::kUpdate);

  EXPECT_STREQ(reportWriteWord(ReportWrite::Kind::kCreate), "created");
  EXPECT_STREQ(reportWriteWord(ReportWrite::Kind::kHeartbeat), "heartbeat");
}

}  // namespace
}  // namespace podshaper
