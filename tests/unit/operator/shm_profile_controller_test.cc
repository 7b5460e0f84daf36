// The ShmProfile controller over caches in memory and the in-memory API, driven on the
// test's thread: the shaped pods and ShmUsages the watches would bring are followed from
// the fake API's objects, and the queue's due keys reconciled by drain().
#include "operator/shm_profile_controller.h"

#include <gtest/gtest.h>

#include "base/timefmt.h"
#include "tests/unit/operator/fake_reconcile_api.h"
#include "tests/unit/operator/memory_cache.h"

namespace podshaper::op {
namespace {

using nlohmann::json;

constexpr long long kMi = 1 << 20;
const std::string kProfile = shmProfilePath("ml", "job.train");

// A pod of Job train that the webhook shaped with profile job.train (2 ranks) and a 161Mi
// /dev/shm, running on gpu-0 since an hour before `now`.
json shapedPod(const std::string& name, const std::string& uid, long long now) {
  json pod = {{"metadata",
               {{"name", name},
                {"namespace", "ml"},
                {"uid", uid},
                {"creationTimestamp", formatTime(now - 3600)},
                {"labels", {{"podshaper.io/shaped", "true"}}},
                {"annotations",
                 {{"podshaper.io/shm-size", "161Mi"},
                  {"podshaper.io/shm-profile", "job.train; ranks=2; inputs=3f9a0c12"}}},
                {"ownerReferences",
                 {{{"apiVersion", "batch/v1"}, {"kind", "Job"}, {"name", "train"}, {"uid", "job-uid"},
                   {"controller", true}}}}}},
              {"spec", {{"nodeName", "gpu-0"}}}};
  pod["spec"]["containers"] = json::array({{{"name", "trainer"}}});
  pod["status"]["phase"] = "Running";
  json cs = {{"name", "trainer"}, {"restartCount", 0}};
  cs["state"]["running"]["startedAt"] = formatTime(now - 3600);
  pod["status"]["containerStatuses"] = json::array({cs});
  return pod;
}

// `pod`, its container ended with `exitCode` (and `message`) at `at`: Succeeded or Failed.
json ended(json pod, int exitCode, long long at, const std::string& message = "") {
  pod["status"]["phase"] = exitCode == 0 ? "Succeeded" : "Failed";
  pod["status"]["containerStatuses"][0]["state"] = {
      {"terminated",
       {{"exitCode", exitCode}, {"reason", exitCode == 0 ? "Completed" : "Error"}, {"message", message},
        {"finishedAt", formatTime(at)}}}};
  return pod;
}

// podshaper-shm's ShmUsage of `pod`: its run 1, ended at `endedAt` (0: open) with `peak`.
json shmUsage(const json& pod, long long endedAt, long long peak) {
  json run = {{"run", 1}, {"startedAt", "2026-11-21T23:00:00Z"}, {"sizeBytes", 161 * kMi}, {"peakBytes", peak}};
  if (endedAt != 0) run["endedAt"] = formatTime(endedAt);
  const std::string name = pod["metadata"]["name"];
  return {{"apiVersion", "podshaper.io/v1alpha1"},
          {"kind", "ShmUsage"},
          {"metadata", {{"name", name}, {"namespace", "ml"}}},
          {"spec", {{"podName", name}, {"podUID", pod["metadata"]["uid"]}, {"nodeName", "gpu-0"}, {"volume", "podshaper-dshm"}}},
          {"status", {{"sizeBytes", 161 * kMi}, {"usedBytes", 0}, {"runs", {run}}}}};
}

const std::string kBusError =
    "ERROR: Unexpected bus error encountered in worker. This might be caused by insufficient shared memory (shm).\n";

class ShmProfileControllerTest : public ::testing::Test {
 protected:
  FakeReconcileApi api;
  FakeClock clock;
  metrics::Registry registry;
  bool leader = true;
  MemoryCache pods{compactPod}, shmUsages{compactShmUsage}, profiles{compactShmProfile};
  ShmProfileController controller{pods,
                                  shmUsages,
                                  profiles,
                                  api,
                                  clock,
                                  registry,
                                  [this] { return leader; },
                                  ProfileSettings{},
                                  {.name = "shm-profile", .now = clock.queueNow()}};

  void putPod(const json& pod) { api.put(podPath("ml", pod["metadata"]["name"]), pod); }
  void putShmUsage(const json& usage) { api.put(shmUsagePath("ml", usage["metadata"]["name"]), usage); }

  // What the watches would bring, then every due key reconciled, until quiet.
  void settle() {
    for (int i = 0; i < 20; ++i) {
      std::map<std::string, json> shaped, usages, made;
      for (const auto& [path, object] : api.objectsUnder("/api")) {
        if (path.find("/pods/") != std::string::npos) shaped.emplace(path, object);
        if (path.find("/shmusages/") != std::string::npos) usages.emplace(path, object);
        if (path.find("/shmprofiles/") != std::string::npos) made.emplace(path, object);
      }
      const auto p = pods.follow(shaped);
      const auto u = shmUsages.follow(usages);
      const auto m = profiles.follow(made);
      if (!p.empty()) controller.podsChanged(p);
      if (!u.empty()) controller.shmUsagesChanged(u);
      if (!m.empty()) controller.profilesChanged(m);
      if (controller.runner().drain() == 0 && p.empty() && u.empty() && m.empty()) return;
    }
    ADD_FAILURE() << "the controller did not settle";
  }
  json profile() const { return api.object(kProfile).value_or(nullptr); }
  std::string runs() const {
    std::string out;
    const json p = profile();
    if (p.is_null()) return "none";
    for (const json& r : p["status"]["runs"]) {
      out += (out.empty() ? "" : " ") + r["pod"].get<std::string>() + "/" + std::to_string(r["run"].get<int>()) + ":" +
             r["end"].get<std::string>() + ":" + std::to_string(r["peakBytes"].get<long long>() / kMi) + "Mi";
    }
    return out;
  }
};

TEST_F(ShmProfileControllerTest, APodThatCompletesMakesItsWorkloadsProfileWithItsRun) {
  const json pod = shapedPod("train-0", "uid-0", clock.wall);
  putPod(pod);
  putShmUsage(shmUsage(pod, 0, 20 * kMi));
  settle();
  EXPECT_EQ(api.writes(), std::vector<std::string>{});  // running: nothing ended yet
  putPod(ended(pod, 0, clock.wall));
  putShmUsage(shmUsage(pod, clock.wall + 1, 48 * kMi));
  settle();
  EXPECT_EQ(api.writes(), (std::vector<std::string>{"create shmprofile ml/job.train", "shmprofile status ml/job.train"}));
  const json p = profile();
  EXPECT_EQ(p["spec"]["workload"], "Job train");
  EXPECT_EQ(p["metadata"]["labels"]["app.kubernetes.io/managed-by"], "podshaper");
  EXPECT_EQ(runs(), "train-0/1:Completed:48Mi");
  EXPECT_TRUE(readShmProfile(p)) << p.dump();
  // Steady: nothing more is written.
  api.clearWrites();
  controller.enqueueAll();
  settle();
  EXPECT_EQ(api.writes(), std::vector<std::string>{});
  EXPECT_NE(registry.render().find("podshaper_operator_writes_total{kind=\"shm_profile\"} 2"), std::string::npos);
}

TEST_F(ShmProfileControllerTest, ASecondPodIsOneStatusWriteAndAPodGoneLeavesItsRun) {
  const json first = shapedPod("train-0", "uid-0", clock.wall);
  putPod(ended(first, 0, clock.wall));
  putShmUsage(shmUsage(first, clock.wall + 1, 48 * kMi));
  settle();
  api.clearWrites();
  clock.advance(600);
  const json second = shapedPod("train-1", "uid-1", clock.wall);
  putPod(second);
  settle();
  putPod(ended(second, 0, clock.wall));
  putShmUsage(shmUsage(second, clock.wall + 1, 60 * kMi));
  settle();
  EXPECT_EQ(api.writes(), std::vector<std::string>{"shmprofile status ml/job.train"});
  EXPECT_EQ(runs(), "train-0/1:Completed:48Mi train-1/1:Completed:60Mi");
  // The Job's pods deleted (their ShmUsages with them): the profile keeps their runs.
  api.clearWrites();
  for (const char* name : {"train-0", "train-1"}) {
    api.remove(podPath("ml", name));
    api.remove(shmUsagePath("ml", name));
  }
  settle();
  EXPECT_EQ(api.writes(), std::vector<std::string>{});
  EXPECT_EQ(runs(), "train-0/1:Completed:48Mi train-1/1:Completed:60Mi");
  // Until the first run is maxAge old: then it goes; then the second, and the profile.
  clock.advance(ProfileSettings{}.maxAgeSeconds - 600 + 2);  // the first ended at +1: expired past +1 + maxAge
  settle();
  EXPECT_EQ(runs(), "train-1/1:Completed:60Mi");
  clock.advance(600);
  settle();
  EXPECT_EQ(api.writes(), (std::vector<std::string>{"shmprofile status ml/job.train", "delete shmprofile ml/job.train"}));
  EXPECT_TRUE(profile().is_null());
}

TEST_F(ShmProfileControllerTest, AProfileWithoutPodsFoundAtStartStillExpires) {
  // Made before this operator started; its pods are long gone.
  const ProfileRun run{.pod = "train-0",
                       .podUID = "uid-0",
                       .run = 1,
                       .endedAt = clock.wall - 86400,
                       .ranks = 2,
                       .sizeBytes = 161 * kMi,
                       .peakBytes = 48 * kMi,
                       .end = RunEnd::kCompleted,
                       .inputs = "3f9a0c12"};
  api.put(kProfile, {{"apiVersion", "podshaper.io/v1alpha1"},
                     {"kind", "ShmProfile"},
                     {"metadata", {{"name", "job.train"}, {"namespace", "ml"}}},
                     {"spec", {{"workload", "Job train"}}},
                     {"status", shmProfileStatus({run}, {}, clock.wall)}});
  settle();
  EXPECT_EQ(api.writes(), std::vector<std::string>{});
  EXPECT_EQ(runs(), "train-0/1:Completed:48Mi");
  clock.advance(ProfileSettings{}.maxAgeSeconds - 86400 + 1);  // its run is maxAge old
  settle();
  EXPECT_EQ(api.writes(), std::vector<std::string>{"delete shmprofile ml/job.train"});
  EXPECT_TRUE(profile().is_null());
}

TEST_F(ShmProfileControllerTest, AFailedPodWithABusErrorIsAShmExhaustedRunThenItsMeasure) {
  const json pod = shapedPod("train-0", "uid-0", clock.wall);
  putPod(pod);
  settle();
  // The pod died; podshaper-shm's end of the run is not there yet.
  putPod(ended(pod, 1, clock.wall, kBusError));
  settle();
  EXPECT_EQ(runs(), "train-0/1:ShmExhausted:161Mi");
  EXPECT_EQ(profile()["status"]["recommendation"]["needPerRankBytes"], 161 * kMi);  // 2 × 161Mi over 2 ranks
  api.clearWrites();
  putShmUsage(shmUsage(pod, clock.wall + 2, 158 * kMi));
  settle();
  EXPECT_EQ(api.writes(), std::vector<std::string>{"shmprofile status ml/job.train"});
  EXPECT_EQ(runs(), "train-0/1:ShmExhausted:158Mi");
}

TEST_F(ShmProfileControllerTest, NotLeadingItWritesNothing) {
  leader = false;
  const json pod = shapedPod("train-0", "uid-0", clock.wall);
  putPod(ended(pod, 0, clock.wall));
  putShmUsage(shmUsage(pod, clock.wall + 1, 48 * kMi));
  settle();
  EXPECT_EQ(api.writes(), std::vector<std::string>{});
  EXPECT_TRUE(profile().is_null());
  // Leading: everything is queued again.
  leader = true;
  controller.enqueueAll();
  settle();
  EXPECT_EQ(runs(), "train-0/1:Completed:48Mi");
}

TEST_F(ShmProfileControllerTest, AStatusWriteThatConflictsIsTriedAgain) {
  const json pod = shapedPod("train-0", "uid-0", clock.wall);
  putPod(ended(pod, 0, clock.wall));
  putShmUsage(shmUsage(pod, clock.wall + 1, 48 * kMi));
  api.fail("PUT", kProfile + "/status", 409, "Conflict");
  settle();  // made, but its status refused: read again and written (the made profile's watch event queued it)
  clock.advance(1);
  settle();
  EXPECT_EQ(runs(), "train-0/1:Completed:48Mi");
  EXPECT_EQ(api.writes(), (std::vector<std::string>{"create shmprofile ml/job.train", "shmprofile status ml/job.train"}));
  int refused = 0;
  for (const auto& call : api.calls()) refused += call.code == 409;
  EXPECT_EQ(refused, 1);
}

}  // namespace
}  // namespace podshaper::op
