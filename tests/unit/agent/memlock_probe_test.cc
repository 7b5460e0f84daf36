#include "agent/memlock_probe.h"

#include <gtest/gtest.h>

namespace podshaper::agent {
namespace {

using nlohmann::json;
using State = MemlockProbeStatus::State;

// The agent's pod as GET pods/NAME returns it, with the memlock-probe container's status.
json podWithProbe(const json& probeStatus) {
  json agent = {{"name", "agent"}, {"ready", true}, {"state", {{"running", {{"startedAt", "2026-11-22T00:00:00Z"}}}}}};
  json probe = probeStatus;
  probe["name"] = "memlock-probe";
  return {{"apiVersion", "v1"},
          {"kind", "Pod"},
          {"metadata", {{"name", "podshaper-agent-x7k2p"}, {"namespace", "podshaper-system"}}},
          {"status", {{"phase", "Running"}, {"containerStatuses", json::array({agent, probe})}}}};
}

constexpr const char* kRuncRefused =
    "failed to create containerd task: failed to create shim task: OCI runtime create failed: runc create failed: "
    "unable to start container process: error during container init: error setting rlimit type 8: operation not "
    "permitted: unknown";

TEST(MemlockRlimit, WrittenAndReadBack) {
  EXPECT_EQ(memlockRlimitJson({}), "{\"hard\":null,\"soft\":null}\n");
  EXPECT_EQ(memlockRlimitJson({4194304, 8388608}), "{\"hard\":8388608,\"soft\":4194304}\n");
  for (const MemlockRlimit& limit : {MemlockRlimit{}, MemlockRlimit{4194304, 8388608}, MemlockRlimit{0, 0}}) {
    auto back = parseMemlockRlimit(memlockRlimitJson(limit));
    ASSERT_TRUE(back) << back.error().message;
    EXPECT_EQ(*back, limit);
  }
}

TEST(MemlockRlimit, BadFilesSayWhatIsWrong) {
  struct Case {
    const char* text;
    const char* error;
  };
  for (const auto& c : std::vector<Case>{{"", "expected {\"soft\": N, \"hard\": N}"},
                                          {"{\"soft\": null", "expected {\"soft\": N"},
                                          {"[1, 2]", "expected {\"soft\": N"},
                                          {"{\"hard\": null}", "\"soft\": expected bytes or null"},
                                          {"{\"soft\": -1, \"hard\": null}", "\"soft\": expected bytes or null"},
                                          {"{\"soft\": 1, \"hard\": \"unlimited\"}", "\"hard\": expected bytes or null"}}) {
    auto limit = parseMemlockRlimit(c.text);
    ASSERT_FALSE(limit) << c.text;
    EXPECT_NE(limit.error().message.find(c.error), std::string::npos) << c.text << ": " << limit.error().message;
  }
}

TEST(MemlockProbeFromPod, TheRuntimeRefusingIsNotGrantedWithItsWords) {
  // The first try: runc's init fails on setrlimit.
  auto first = memlockProbeFromPod(podWithProbe(
      {{"ready", false},
       {"restartCount", 0},
       {"state", {{"terminated", {{"exitCode", 128}, {"reason", "StartError"}, {"message", kRuncRefused}}}}}}));
  EXPECT_EQ(first.state, State::kNotGranted);
  EXPECT_EQ(first.message, kRuncRefused);
  // Then the kubelet backs off: the runtime's words are in the last termination,
  // not in the back-off's own message (which changes with every restart).
  auto backOff = memlockProbeFromPod(podWithProbe(
      {{"ready", false},
       {"restartCount", 3},
       {"state",
        {{"waiting",
          {{"reason", "CrashLoopBackOff"},
           {"message", "back-off 40s restarting failed container=memlock-probe pod=podshaper-agent-x7k2p_podshaper-system"}}}}},
       {"lastState", {{"terminated", {{"exitCode", 128}, {"reason", "StartError"}, {"message", kRuncRefused}}}}}}));
  EXPECT_EQ(backOff, first);
  for (const char* reason : {"RunContainerError", "CreateContainerError"}) {
    auto waiting = memlockProbeFromPod(
        podWithProbe({{"state", {{"waiting", {{"reason", reason}, {"message", "error setting rlimit type 8\n"}}}}}}));
    EXPECT_EQ(waiting.state, State::kNotGranted) << reason;
    EXPECT_EQ(waiting.message, "error setting rlimit type 8") << reason;
  }
  // No words at all: the reason stands for them.
  auto bare = memlockProbeFromPod(podWithProbe({{"state", {{"waiting", {{"reason", "RunContainerError"}}}}}}));
  EXPECT_EQ(bare.message, "RunContainerError");
}

TEST(MemlockProbeFromPod, AnythingElseIsWaitingForTheFile) {
  for (const json& status : {
           json{{"state", {{"waiting", {{"reason", "ContainerCreating"}}}}}},
           json{{"state", {{"waiting", {{"reason", "PodInitializing"}}}}}},
           json{{"state", {{"running", {{"startedAt", "2026-11-22T00:00:00Z"}}}}}},
           json{{"state", {{"terminated", {{"exitCode", 0}, {"reason", "Completed"}}}}}},
           json{{"state", json::object()}},
           json::object(),
       }) {
    EXPECT_EQ(memlockProbeFromPod(podWithProbe(status)).state, State::kWaiting) << status.dump();
  }
  // A pod without the container (an older DaemonSet), without statuses, or no pod at all.
  json other = podWithProbe({{"state", {{"waiting", {{"reason", "StartError"}}}}}});
  other["status"]["containerStatuses"][1]["name"] = "sidecar";
  EXPECT_EQ(memlockProbeFromPod(other).state, State::kWaiting);
  EXPECT_EQ(memlockProbeFromPod(json{{"status", {{"phase", "Pending"}}}}).state, State::kWaiting);
  EXPECT_EQ(memlockProbeFromPod(json()).state, State::kWaiting);
  EXPECT_EQ(memlockProbeFromPod(json::array()).state, State::kWaiting);
}

TEST(ApplyMemlockProbe, WhatTheReportSays) {
  HostInfo own;
  own.memlockBytes = 8ULL << 20;  // the agent's own container: the runtime's default

  HostInfo waiting = own;
  applyMemlockProbe(waiting, MemlockProbeStatus{}, MemlockLimit{});
  EXPECT_EQ(waiting.memlockBytes, 8ULL << 20);
  EXPECT_FALSE(waiting.memlockProbe);

  HostInfo granted = own;
  applyMemlockProbe(granted, MemlockProbeStatus{State::kGranted, std::nullopt, ""}, MemlockLimit{});
  EXPECT_FALSE(granted.memlockBytes);  // unlimited, as the probe got it
  EXPECT_EQ(granted.memlockProbe, (MemlockProbe{MemlockLimit{}, true, ""}));

  HostInfo limited = own;
  applyMemlockProbe(limited, MemlockProbeStatus{State::kGranted, 4194304, ""}, MemlockLimit{4194304});
  EXPECT_EQ(limited.memlockBytes, 4194304u);
  Topology report;
  report.host = limited;
  EXPECT_EQ(toJson(report)["host"]["memlockProbe"],
            json::parse(R"({"requested":"4194304","granted":true,"message":""})"));

  HostInfo refused = own;
  applyMemlockProbe(refused, MemlockProbeStatus{State::kNotGranted, std::nullopt, kRuncRefused}, MemlockLimit{});
  EXPECT_EQ(refused.memlockBytes, 8ULL << 20);
  EXPECT_EQ(refused.memlockProbe, (MemlockProbe{MemlockLimit{}, false, kRuncRefused}));
}

}  // namespace
}  // namespace podshaper::agent
