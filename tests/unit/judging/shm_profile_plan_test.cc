// A workload's ShmProfile, planned: data in (the profile read, the pods, their ShmUsages,
// the time), data out (the runs kept, the one write, when to look again).
#include "judging/shm_profile_plan.h"

#include <gtest/gtest.h>

#include "base/timefmt.h"

namespace podshaper {
namespace {

using json = nlohmann::json;

constexpr int64_t kMi = 1 << 20;
constexpr int64_t kT = 1795305600;  // 2026-11-22T00:00:00Z: when the tests' runs end
constexpr int64_t kDay = 86400;

// A pod of Job train, shaped with profile job.train (2 ranks, inputs 3f9a0c12) and a
// 161Mi /dev/shm, on gpu-0, in `phase`.
json pod(const std::string& name, const std::string& uid, const std::string& phase = "Running",
         const std::string& profile = "job.train; ranks=2; inputs=3f9a0c12") {
  return {{"metadata",
           {{"name", name},
            {"namespace", "ml"},
            {"uid", uid},
            {"creationTimestamp", formatTime(kT - 3600)},
            {"labels", {{"podshaper.io/shaped", "true"}, {"batch.kubernetes.io/job-name", "train"}}},
            {"annotations", {{"podshaper.io/shm-size", "161Mi"}, {"podshaper.io/shm-profile", profile}}},
            {"ownerReferences",
             {{{"apiVersion", "batch/v1"}, {"kind", "Job"}, {"name", "train"}, {"uid", "job-uid"},
               {"controller", true}}}}}},
          {"spec", {{"nodeName", "gpu-0"}}},
          {"status", {{"phase", phase}}}};
}

// `p` with its container's `state` (or lastState) terminated with `exitCode` at `at`.
json terminated(json p, int exitCode, int64_t at, const std::string& message = "", const char* state = "state",
                int restarts = 0) {
  json cs = {{"name", "trainer"}, {"restartCount", restarts}};
  cs[state]["terminated"] = {{"exitCode", exitCode},
                             {"reason", exitCode == 0 ? "Completed" : "Error"},
                             {"message", message},
                             {"startedAt", formatTime(at - 600)},
                             {"finishedAt", formatTime(at)}};
  if (std::string(state) == "lastState") cs["state"]["running"] = {{"startedAt", formatTime(at + 1)}};
  p["status"]["containerStatuses"] = json::array({cs});
  return p;
}

const std::string kBusError =
    "ERROR: Unexpected bus error encountered in worker. This might be caused by insufficient shared memory (shm).\n";

struct Measured {
  int64_t run;
  int64_t endedAt;  // 0: open
  int64_t peak;
  int64_t size = 161 * kMi;
};

// podshaper-shm's ShmUsage of pod `name` (uid `uid`) on gpu-0.
json usage(const std::string& name, const std::string& uid, const std::vector<Measured>& runs) {
  json list = json::array();
  for (const Measured& m : runs) {
    json r = {{"run", m.run}, {"startedAt", formatTime(kT - 600)}, {"sizeBytes", m.size}, {"peakBytes", m.peak}};
    if (m.endedAt != 0) r["endedAt"] = formatTime(m.endedAt);
    list.push_back(r);
  }
  return {{"metadata", {{"name", name}, {"namespace", "ml"}}},
          {"spec", {{"podName", name}, {"podUID", uid}, {"nodeName", "gpu-0"}, {"volume", "podshaper-dshm"}}},
          {"status", {{"runs", list}}}};
}

ShmProfileInputs inputs(std::vector<ProfilePod> pods, const json* existing = nullptr, int64_t now = kT + 60) {
  return {.namespaceName = "ml", .name = "job.train", .existing = existing, .pods = std::move(pods), .now = now,
          .settings = {}};
}

// The profile as the API server holds it after the plan's writes.
json stored(const ShmProfilePlan& plan, const std::string& resourceVersion = "7") {
  json object = plan.object;
  object["metadata"]["resourceVersion"] = resourceVersion;
  object["status"] = plan.status;
  return object;
}

std::string ends(const std::vector<ProfileRun>& runs) {
  std::string out;
  for (const ProfileRun& r : runs) out += (out.empty() ? "" : " ") + r.pod + "/" + std::to_string(r.run) + ":" + toString(r.end);
  return out;
}

TEST(ShmProfilePlan, ACompletedPodsMeasuredRunMakesTheProfile) {
  const json p = terminated(pod("train-0", "uid-0", "Succeeded"), 0, kT);
  const json u = usage("train-0", "uid-0", {{1, kT + 1, 48 * kMi}});
  const ShmProfilePlan plan = planShmProfile(inputs({{&p, &u}}));
  ASSERT_EQ(plan.write, ProfileWrite::kCreate);
  ASSERT_EQ(plan.runs.size(), 1u);
  const ProfileRun& r = plan.runs[0];
  EXPECT_EQ(r.pod, "train-0");
  EXPECT_EQ(r.podUID, "uid-0");
  EXPECT_EQ(r.run, 1);
  EXPECT_EQ(r.endedAt, kT + 1);
  EXPECT_EQ(r.ranks, 2u);
  EXPECT_EQ(r.inputs, "3f9a0c12");
  EXPECT_EQ(r.sizeBytes, 161u * kMi);
  EXPECT_EQ(r.peakBytes, 48u * kMi);
  EXPECT_EQ(r.end, RunEnd::kCompleted);
  EXPECT_EQ(plan.object, json::parse(R"({"apiVersion": "podshaper.io/v1alpha1", "kind": "ShmProfile",
      "metadata": {"name": "job.train", "namespace": "ml", "labels": {"app.kubernetes.io/managed-by": "podshaper"}},
      "spec": {"workload": "Job train"}})"));
  EXPECT_EQ(plan.status, shmProfileStatus(plan.runs, {}, kT + 60));
  EXPECT_EQ(plan.status["recommendation"]["needPerRankBytes"], 24 * kMi);
  EXPECT_EQ(plan.lookAgainAt, kT + 1 + ProfileSettings{}.maxAgeSeconds + 1);
  EXPECT_TRUE(plan.unreadable.empty());
  // What the operator wrote reads back.
  EXPECT_TRUE(readShmProfile(stored(plan)));
}

TEST(ShmProfilePlan, ARestartsRunEndedAndARunningOneAddsNothing) {
  const json restarted = terminated(pod("train-0", "uid-0"), 1, kT - 300, "killed", "lastState", 1);
  const json u = usage("train-0", "uid-0", {{1, kT - 299, 40 * kMi}, {2, 0, 30 * kMi}});
  const ShmProfilePlan plan = planShmProfile(inputs({{&restarted, &u}}));
  EXPECT_EQ(ends(plan.runs), "train-0/1:Ended");
  // Nothing ended: nothing to keep, no profile made.
  const json running = pod("train-1", "uid-1");
  const json open = usage("train-1", "uid-1", {{1, 0, 30 * kMi}});
  EXPECT_EQ(planShmProfile(inputs({{&running, &open}})).write, ProfileWrite::kNone);
  EXPECT_EQ(planShmProfile(inputs({{&running, nullptr}})).write, ProfileWrite::kNone);
}

TEST(ShmProfilePlan, AFailedPodsRunIsFailedUnlessItDiedOfAFullShm) {
  const json failed = terminated(pod("train-0", "uid-0", "Failed"), 1, kT, "ValueError");
  const json u = usage("train-0", "uid-0", {{1, kT + 2, 48 * kMi}});
  EXPECT_EQ(ends(planShmProfile(inputs({{&failed, &u}})).runs), "train-0/1:Failed");
  const json died = terminated(pod("train-0", "uid-0", "Failed"), 1, kT, kBusError);
  const json full = usage("train-0", "uid-0", {{1, kT + 2, 161 * kMi}});
  const ShmProfilePlan plan = planShmProfile(inputs({{&died, &full}}));
  EXPECT_EQ(ends(plan.runs), "train-0/1:ShmExhausted");
  // Counted as needing twice its size: 2 × 161Mi over 2 ranks.
  EXPECT_EQ(plan.status["recommendation"]["needPerRankBytes"], 161 * kMi);
}

TEST(ShmProfilePlan, ADeathWithoutAMeasuredRunCountsAtItsSize) {
  // No ShmUsage (podshaper-shm not installed): run 1, of shm-size, full, when it died.
  const json died = terminated(pod("train-0", "uid-0", "Failed"), 135, kT);
  ShmProfilePlan plan = planShmProfile(inputs({{&died, nullptr}}));
  ASSERT_EQ(plan.write, ProfileWrite::kCreate);
  ASSERT_EQ(plan.runs.size(), 1u);
  EXPECT_EQ(ends(plan.runs), "train-0/1:ShmExhausted");
  EXPECT_EQ(plan.runs[0].sizeBytes, 161u * kMi);
  EXPECT_EQ(plan.runs[0].peakBytes, 161u * kMi);
  EXPECT_EQ(plan.runs[0].endedAt, kT);
  // Its ShmUsage with the run still open (the end not written yet): that run's number.
  const json open = usage("train-0", "uid-0", {{1, kT - 900, 20 * kMi}, {2, 0, 100 * kMi}});
  plan = planShmProfile(inputs({{&died, &open}}));
  EXPECT_EQ(ends(plan.runs), "train-0/1:Ended train-0/2:ShmExhausted");
  // Every run ended long before: the next number.
  const json before = usage("train-0", "uid-0", {{1, kT - 900, 20 * kMi}});
  EXPECT_EQ(ends(planShmProfile(inputs({{&died, &before}})).runs), "train-0/1:Ended train-0/2:ShmExhausted");
  // A death of the user's own volume, without shm-size: no size to count.
  json unsized = died;
  unsized["metadata"]["annotations"].erase("podshaper.io/shm-size");
  EXPECT_TRUE(planShmProfile(inputs({{&unsized, nullptr}})).runs.empty());
}

TEST(ShmProfilePlan, TheMeasuredRunReplacesTheDeathCountedWithoutIt) {
  const json died = terminated(pod("train-0", "uid-0", "Failed"), 135, kT);
  const json profile = stored(planShmProfile(inputs({{&died, nullptr}})));
  const json u = usage("train-0", "uid-0", {{1, kT + 3, 150 * kMi}});
  const ShmProfilePlan plan = planShmProfile(inputs({{&died, &u}}, &profile));
  ASSERT_EQ(plan.write, ProfileWrite::kStatus);
  ASSERT_EQ(plan.runs.size(), 1u);
  EXPECT_EQ(plan.runs[0].peakBytes, 150u * kMi);
  EXPECT_EQ(plan.runs[0].endedAt, kT + 3);
  EXPECT_EQ(plan.runs[0].end, RunEnd::kShmExhausted);
  EXPECT_EQ(plan.object["metadata"]["resourceVersion"], "7");  // the write's precondition
  EXPECT_EQ(plan.object["status"], plan.status);
  EXPECT_EQ(plan.object["spec"], profile["spec"]);
}

TEST(ShmProfilePlan, ADeathCountedWithoutItsMeasureDoesNotReplaceTheMeasuredRun) {
  // The profile has the measured run; the ShmUsages' cache is not filled again yet.
  const json died = terminated(pod("train-0", "uid-0", "Failed"), 135, kT);
  const json u = usage("train-0", "uid-0", {{1, kT + 3, 150 * kMi}});
  const json profile = stored(planShmProfile(inputs({{&died, &u}})));
  const ShmProfilePlan plan = planShmProfile(inputs({{&died, nullptr}}, &profile));
  EXPECT_EQ(plan.write, ProfileWrite::kNone);
  ASSERT_EQ(plan.runs.size(), 1u);
  EXPECT_EQ(plan.runs[0].peakBytes, 150u * kMi);
}

TEST(ShmProfilePlan, ARunsToldEndStaysWhenALaterLookSeesOnlyThatItEnded) {
  // Run 1 died (seen in lastState while run 2 ran), then run 2 died of something else:
  // run 1's death is no longer in the pod's status.
  const json first = terminated(pod("train-0", "uid-0"), 1, kT, kBusError, "lastState", 1);
  const json u1 = usage("train-0", "uid-0", {{1, kT + 1, 161 * kMi}, {2, 0, 10 * kMi}});
  const json profile = stored(planShmProfile(inputs({{&first, &u1}})));
  const json later = terminated(pod("train-0", "uid-0"), 1, kT + 900, "ValueError", "lastState", 2);
  const json u2 = usage("train-0", "uid-0", {{1, kT + 1, 161 * kMi}, {2, kT + 901, 10 * kMi}, {3, 0, 0}});
  const ShmProfilePlan plan = planShmProfile(inputs({{&later, &u2}}, &profile, kT + 960));
  EXPECT_EQ(ends(plan.runs), "train-0/1:ShmExhausted train-0/2:Ended");
}

TEST(ShmProfilePlan, ThePodsRunsAreMergedWithThoseTheProfileKept) {
  const json a = terminated(pod("train-0", "uid-0", "Succeeded"), 0, kT);
  const json ua = usage("train-0", "uid-0", {{1, kT + 1, 48 * kMi}});
  const json profile = stored(planShmProfile(inputs({{&a, &ua}})));
  // train-0 is gone; train-1 completes a day later.
  const json b = terminated(pod("train-1", "uid-1", "Succeeded"), 0, kT + kDay);
  const json ub = usage("train-1", "uid-1", {{1, kT + kDay + 1, 60 * kMi}});
  const ShmProfilePlan plan = planShmProfile(inputs({{&b, &ub}}, &profile, kT + kDay + 60));
  ASSERT_EQ(plan.write, ProfileWrite::kStatus);
  EXPECT_EQ(ends(plan.runs), "train-0/1:Completed train-1/1:Completed");
  EXPECT_EQ(plan.status["recommendation"]["needPerRankBytes"], 30 * kMi);
  EXPECT_EQ(plan.lookAgainAt, kT + 1 + ProfileSettings{}.maxAgeSeconds + 1);  // the oldest's expiry
}

TEST(ShmProfilePlan, NothingIsWrittenWhenNothingChanged) {
  const json a = terminated(pod("train-0", "uid-0", "Succeeded"), 0, kT);
  const json ua = usage("train-0", "uid-0", {{1, kT + 1, 48 * kMi}});
  const json profile = stored(planShmProfile(inputs({{&a, &ua}})));
  for (int64_t later : {int64_t{60}, 3600 * int64_t{5}, kDay}) {
    const ShmProfilePlan plan = planShmProfile(inputs({{&a, &ua}}, &profile, kT + later));
    EXPECT_EQ(plan.write, ProfileWrite::kNone) << later;
    EXPECT_EQ(plan.runs.size(), 1u);
  }
  // The pod gone: the profile keeps its run, and writes nothing.
  EXPECT_EQ(planShmProfile(inputs({}, &profile)).write, ProfileWrite::kNone);
  // Another headroom is another recommendation.
  ShmProfileInputs more = inputs({}, &profile);
  more.settings.headroomPercent = 50;
  EXPECT_EQ(planShmProfile(more).write, ProfileWrite::kStatus);
}

TEST(ShmProfilePlan, OldRunsExpireAndTheLastRunsKeptStay) {
  std::vector<json> pods, usages;
  for (int i = 0; i < 5; ++i) {
    const std::string n = std::to_string(i);
    pods.push_back(terminated(pod("train-" + n, "uid-" + n, "Succeeded"), 0, kT + i * kDay));
    usages.push_back(usage("train-" + n, "uid-" + n, {{1, kT + i * kDay, (10 + i) * kMi}}));
  }
  std::vector<ProfilePod> all;
  for (int i = 0; i < 5; ++i) all.push_back({&pods[i], &usages[i]});
  ShmProfileInputs in = inputs(all, nullptr, kT + 4 * kDay + 60);
  in.settings.runsKept = 3;
  ShmProfilePlan plan = planShmProfile(in);
  EXPECT_EQ(ends(plan.runs), "train-2/1:Completed train-3/1:Completed train-4/1:Completed");
  EXPECT_EQ(plan.lookAgainAt, kT + 2 * kDay + in.settings.maxAgeSeconds + 1);
  // Two days old at most: train-2's ran out.
  in.settings.maxAgeSeconds = 2 * kDay;
  in.now = kT + 4 * kDay + 1;
  plan = planShmProfile(in);
  EXPECT_EQ(ends(plan.runs), "train-3/1:Completed train-4/1:Completed");
  EXPECT_EQ(plan.lookAgainAt, kT + 3 * kDay + 2 * kDay + 1);
}

TEST(ShmProfilePlan, AProfileWhoseRunsAllExpiredIsDeleted) {
  const json a = terminated(pod("train-0", "uid-0", "Succeeded"), 0, kT);
  const json ua = usage("train-0", "uid-0", {{1, kT + 1, 48 * kMi}});
  const json profile = stored(planShmProfile(inputs({{&a, &ua}})), "42");
  const int64_t expiry = kT + 1 + ProfileSettings{}.maxAgeSeconds + 1;
  EXPECT_EQ(planShmProfile(inputs({}, &profile, expiry - 1)).write, ProfileWrite::kNone);
  const ShmProfilePlan plan = planShmProfile(inputs({}, &profile, expiry));
  EXPECT_EQ(plan.write, ProfileWrite::kDelete);
  EXPECT_EQ(plan.resourceVersion, "42");
  EXPECT_TRUE(plan.runs.empty());
  EXPECT_FALSE(plan.lookAgainAt);
}

TEST(ShmProfilePlan, APodOfAnotherProfileOrNamespaceIsPassedOver) {
  const json other = terminated(pod("serve-0", "uid-9", "Succeeded", "deployment.serve; ranks=1; inputs=00000000"), 0, kT);
  const json uo = usage("serve-0", "uid-9", {{1, kT + 1, 48 * kMi}});
  json elsewhere = terminated(pod("train-0", "uid-0", "Succeeded"), 0, kT);
  elsewhere["metadata"]["namespace"] = "other";
  const json ue = usage("train-0", "uid-0", {{1, kT + 1, 48 * kMi}});
  json unannotated = elsewhere;
  unannotated["metadata"]["namespace"] = "ml";
  unannotated["metadata"]["annotations"].erase("podshaper.io/shm-profile");
  const ShmProfilePlan plan = planShmProfile(inputs({{&other, &uo}, {&elsewhere, &ue}, {&unannotated, &ue}}));
  EXPECT_EQ(plan.write, ProfileWrite::kNone);
  EXPECT_TRUE(plan.runs.empty());
}

TEST(ShmProfilePlan, AShmUsageOfAnotherPodUidIsNotRead) {
  // The pod made again under its name: the earlier one's ShmUsage says nothing of it.
  const json p = terminated(pod("train-0", "uid-new", "Succeeded"), 0, kT);
  const json u = usage("train-0", "uid-old", {{1, kT + 1, 48 * kMi}});
  EXPECT_EQ(planShmProfile(inputs({{&p, &u}})).write, ProfileWrite::kNone);
  // Nor is a death then counted from the other's runs: its own run 1, at its size.
  const json died = terminated(pod("train-0", "uid-new", "Failed"), 135, kT);
  EXPECT_EQ(ends(planShmProfile(inputs({{&died, &u}})).runs), "train-0/1:ShmExhausted");
}

TEST(ShmProfilePlan, AProfileThatDoesNotReadStartsAgainFromThePodsAndSaysWhy) {
  const json a = terminated(pod("train-0", "uid-0", "Succeeded"), 0, kT);
  const json ua = usage("train-0", "uid-0", {{1, kT + 1, 48 * kMi}});
  json edited = stored(planShmProfile(inputs({{&a, &ua}})));
  edited["status"]["runs"].push_back(edited["status"]["runs"][0]);
  edited["status"]["runs"][1]["podUID"] = "uid-x";
  edited["status"]["runs"][1]["peakBytes"] = 999 * kMi;  // above its size
  const ShmProfilePlan plan = planShmProfile(inputs({{&a, &ua}}, &edited));
  EXPECT_NE(plan.unreadable.find("peakBytes is above its sizeBytes"), std::string::npos) << plan.unreadable;
  EXPECT_EQ(plan.write, ProfileWrite::kStatus);
  EXPECT_EQ(ends(plan.runs), "train-0/1:Completed");
  // Made, its status not written yet: no runs, nothing wrong.
  json made = edited;
  made.erase("status");
  const ShmProfilePlan fresh = planShmProfile(inputs({{&a, &ua}}, &made));
  EXPECT_TRUE(fresh.unreadable.empty());
  EXPECT_EQ(fresh.write, ProfileWrite::kStatus);
}

}  // namespace
}  // namespace podshaper
