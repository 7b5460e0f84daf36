#include "judging/shm_exhausted.h"

#include <algorithm>
#include <cstdint>
#include <functional>

#include <gtest/gtest.h>

namespace podshaper {
namespace {

using json = nlohmann::json;

// A shaped pod whose container ended.
json endedPod(const json& terminated, long long restarts = 0, const char* state = "state") {
  json cs = {{"name", "trainer"}, {"restartCount", restarts}};
  cs[state]["terminated"] = terminated;
  if (std::string(state) == "lastState") cs["state"]["waiting"] = {{"reason", "CrashLoopBackOff"}};
  return {{"metadata",
           {{"name", "train-0"},
            {"namespace", "ml"},
            {"uid", "pod-uid"},
            {"annotations",
             {{"podshaper.io/shm-size", "161Mi"},
              {"podshaper.io/shm-formula", "1 rank × (2 workers × prefetch 4 + 2) × 4Mi × 1.25 headroom"}}},
            {"ownerReferences",
             {{{"apiVersion", "batch/v1"}, {"kind", "Job"}, {"name", "train"}, {"uid", "job-uid"},
               {"controller", true}}}}}},
          {"status", {{"phase", "Failed"}, {"containerStatuses", {cs}}}}};
}

const std::string kDataLoaderTail =
    "torch 1.13.1, 1 rank(s), /dev/shm 161 MiB\n"
    "ERROR: Unexpected bus error encountered in worker. This might be caused by insufficient shared memory (shm).\n"
    "rank 0: exit code 1\ntraining failed: 1 rank(s)\n";
const std::string kNcclTail =
    "[2026-11-26 03:05:15] vm:2781:2911 [0] misc/shmutils.cc:132 NCCL WARN Error while creating shared memory segment "
    "/dev/shm/nccl-4PshbB (size 34210176), error: No space left on device (28)\n";

TEST(ShmExhausted, AFailureSaysWhenTheRunDied) {
  auto f = judgeTerminations(endedPod({{"exitCode", 135}, {"finishedAt", "2026-11-26T03:05:15Z"}}));
  ASSERT_EQ(f.size(), 1u);
  EXPECT_EQ(f[0].finishedAt, 1795662315);
  auto unsaid = judgeTerminations(endedPod({{"exitCode", 135}}));
  ASSERT_EQ(unsaid.size(), 1u);
  EXPECT_EQ(unsaid[0].finishedAt, 0);
}

TEST(ShmExhausted, ADataLoaderBusErrorNamesTheAnnotationsToChange) {
  auto f = judgeTerminations(endedPod({{"exitCode", 1}, {"reason", "Error"}, {"message", kDataLoaderTail}}));
  ASSERT_EQ(f.size(), 1u);
  EXPECT_EQ(f[0].cause, ShmCause::kDataLoader);
  EXPECT_FALSE(f[0].restarted);
  EXPECT_EQ(f[0].key, "pod-uid/trainer/first/dataloader");
  EXPECT_EQ(f[0].event.type, "Warning");
  EXPECT_EQ(f[0].event.reason, "ShmExhausted");
  const std::string& m = f[0].event.message;
  EXPECT_EQ(m.rfind("Container \"trainer\" ran out of /dev/shm: a PyTorch DataLoader worker could not put its batch "
                    "there (\"ERROR: Unexpected bus error encountered in worker. This might be caused by insufficient "
                    "shared memory (shm).\"). /dev/shm was 161Mi",
                    0),
            0u)
      << m;
  for (const char* a : {"podshaper.io/dataloader-workers", "podshaper.io/prefetch-factor", "podshaper.io/batch-bytes",
                        "podshaper.io/batch-shape", "The size: 1 rank × (2 workers"}) {
    EXPECT_NE(m.find(a), std::string::npos) << a << " in " << m;
  }
  EXPECT_EQ(m.find("nccl-communicators"), std::string::npos);
}

TEST(ShmExhausted, NcclsNoSpaceLineNamesTheCommunicators) {
  auto f = judgeTerminations(endedPod({{"exitCode", 1}, {"message", "some output\n" + kNcclTail}}));
  ASSERT_EQ(f.size(), 1u);
  EXPECT_EQ(f[0].cause, ShmCause::kNccl);
  EXPECT_NE(f[0].event.message.find("NCCL could not make its shared memory segment there (\"[2026-11-26 03:05:15]"),
            std::string::npos);
  EXPECT_NE(f[0].event.message.find("set the pod's annotation podshaper.io/nccl-communicators"), std::string::npos);
}

TEST(ShmExhausted, ExitCode135WithoutWordsIsSigbus) {
  auto f = judgeTerminations(endedPod({{"exitCode", 135}, {"reason", "Error"}}));
  ASSERT_EQ(f.size(), 1u);
  EXPECT_EQ(f[0].cause, ShmCause::kSigbus);
  EXPECT_NE(f[0].event.message.find("killed by SIGBUS (exit code 135)"), std::string::npos);
  EXPECT_NE(f[0].event.message.find("nccl-communicators"), std::string::npos);
  EXPECT_NE(f[0].event.message.find("dataloader-workers"), std::string::npos);
}

TEST(ShmExhausted, OtherEndsAreNotBlamedOnShm) {
  EXPECT_TRUE(judgeTerminations(endedPod({{"exitCode", 0}, {"message", kDataLoaderTail}})).empty());
  EXPECT_TRUE(judgeTerminations(endedPod({{"exitCode", 137}, {"reason", "OOMKilled"}})).empty());
  EXPECT_TRUE(judgeTerminations(endedPod({{"exitCode", 1}, {"message", "No space left on device: /data/ckpt"}})).empty());
}

TEST(ShmExhausted, EachOfPyTorchsSharedMemoryLinesIsTheDataLoader) {
  // The lines PyTorch prints (torch/utils/data/_utils/signal_handling.py, dataloader.py,
  // the shared-memory allocator), each alone in the log's tail.
  for (const std::string line :
       {"RuntimeError: DataLoader worker (pid 4242) is killed by signal: Bus error. It is possible that dataloader's "
        "workers are out of shared memory. Please try to raise your shared memory limit.",
        "RuntimeError: DataLoader worker (pid(s) 4242) exited unexpectedly",
        "RuntimeError: unable to write to file </torch_4242_1879384152_0>: No space left on device (28)",
        "ERROR: Unexpected bus error encountered in worker. This might be caused by insufficient shared memory (shm)."}) {
    auto f = judgeTerminations(endedPod({{"exitCode", 1}, {"message", "Traceback (most recent call last):\n" + line}}));
    ASSERT_EQ(f.size(), 1u) << line;
    EXPECT_EQ(f[0].cause, ShmCause::kDataLoader) << line;
    EXPECT_NE(f[0].event.message.find(line.substr(0, 60)), std::string::npos) << f[0].event.message;
  }
}

TEST(ShmExhausted, AWorkerThatDiedOfSomethingElseIsNotBlamedOnShm) {
  // The OOM killer at the container's memory limit, a crash, an exception in the worker:
  // PyTorch's "exited unexpectedly" comes with each, and /dev/shm is not the cause.
  for (const std::string tail :
       {"RuntimeError: DataLoader worker (pid 4242) is killed by signal: Killed.\n"
        "RuntimeError: DataLoader worker (pid(s) 4242) exited unexpectedly\n",
        "RuntimeError: DataLoader worker (pid 4242) is killed by signal: Segmentation fault.\n"
        "RuntimeError: DataLoader worker (pid(s) 4242) exited unexpectedly\n",
        "RuntimeError: DataLoader worker (pid 4242) exited unexpectedly with exit code 1. Details are lost due to "
        "multiprocessing.\n"}) {
    EXPECT_TRUE(judgeTerminations(endedPod({{"exitCode", 1}, {"message", tail}})).empty()) << tail;
  }
}

TEST(ShmExhausted, NcclsFailedToExtendLineIsNccl) {
  auto f = judgeTerminations(endedPod(
      {{"exitCode", 1},
       {"message", "NCCL WARN Error: failed to extend /dev/shm/nccl-Xb3kQ2 to 9637892 bytes, error: No space left "
                   "on device (28)\n"}}));
  ASSERT_EQ(f.size(), 1u);
  EXPECT_EQ(f[0].cause, ShmCause::kNccl);
}

TEST(ShmExhausted, ARankKilledBySigbusUnderTorchrunIsSigbus) {
  // torchrun (torch.distributed.elastic) exits 1 and names the signal its rank died of.
  auto f = judgeTerminations(endedPod(
      {{"exitCode", 1},
       {"message", "torch.distributed.elastic.multiprocessing.api: [ERROR] failed (exitcode: -7) local_rank: 0 "
                   "(pid: 42) of binary: /usr/bin/python3\nSignal 7 (SIGBUS) received by PID 42\n"}}));
  ASSERT_EQ(f.size(), 1u);
  EXPECT_EQ(f[0].cause, ShmCause::kSigbus);
  EXPECT_NE(f[0].event.message.find("one of its processes was killed by SIGBUS"), std::string::npos)
      << f[0].event.message;
  EXPECT_NE(f[0].event.message.find("(\"Signal 7 (SIGBUS) received by PID 42\")"), std::string::npos);
}

TEST(ShmExhausted, Signal7WithoutAnExitCodeIsSigbus) {
  auto f = judgeTerminations(endedPod({{"exitCode", 1}, {"signal", 7}}));
  ASSERT_EQ(f.size(), 1u);
  EXPECT_EQ(f[0].cause, ShmCause::kSigbus);
}

TEST(ShmExhausted, ARestartedRunSaysEarlierRunsFilledIt) {
  // Waiting in CrashLoopBackOff after its second run: restartCount 2, the last run was run 2.
  auto f = judgeTerminations(endedPod({{"exitCode", 1}, {"message", kNcclTail}}, 2, "lastState"));
  ASSERT_EQ(f.size(), 1u);
  EXPECT_TRUE(f[0].restarted);
  EXPECT_EQ(f[0].key, "pod-uid/trainer/restarted/nccl");
  EXPECT_NE(f[0].event.message.find("This was run 2 of the container in this pod: /dev/shm is the pod's emptyDir and "
                                    "keeps what earlier runs left"),
            std::string::npos)
      << f[0].event.message;
  // Its first run's end (restartCount 1, lastState) is a first run.
  auto first = judgeTerminations(endedPod({{"exitCode", 1}, {"message", kNcclTail}}, 1, "lastState"));
  ASSERT_EQ(first.size(), 1u);
  EXPECT_FALSE(first[0].restarted);
}

// The pod as the operator keeps it: its container's /dev/shm mount and that volume.
json withShmVolume(json pod, json volume) {
  pod["spec"]["containers"] = json::array(
      {{{"name", "trainer"}, {"volumeMounts", json::array({{{"name", volume["name"]}, {"mountPath", "/dev/shm"}}})}}});
  pod["spec"]["volumes"] = json::array({std::move(volume)});
  return pod;
}

TEST(ShmExhausted, AVolumeOfThePodsOwnIsNamedWithItsSizeAndWhatToChange) {
  json pod = withShmVolume(endedPod({{"exitCode", 1}, {"reason", "Error"}, {"message", kDataLoaderTail}}),
                           {{"name", "dshm"}, {"emptyDir", {{"medium", "Memory"}, {"sizeLimit", "1Gi"}}}});
  pod["metadata"]["annotations"]["podshaper.io/shm-size"] = "1Gi";
  auto f = judgeTerminations(pod);
  ASSERT_EQ(f.size(), 1u);
  const std::string& m = f[0].event.message;
  EXPECT_NE(m.find("/dev/shm is the pod's own emptyDir \"dshm\" (medium Memory, sizeLimit 1Gi), not podshaper's. Raise "
                   "the volume's sizeLimit (and the container's memory for it) to at least what the pod needs, or drop "
                   "the container's /dev/shm mount so that podshaper mounts one of that size."),
            std::string::npos)
      << m;
  EXPECT_EQ(m.find("sized by podshaper"), std::string::npos) << m;
  EXPECT_NE(m.find("podshaper.io/dataloader-workers"), std::string::npos) << m;  // and the annotations
  EXPECT_NE(m.find("The size: "), std::string::npos) << m;
}

TEST(ShmExhausted, AVolumeWithoutShmSizeIsStillDescribed) {
  json ended = endedPod({{"exitCode", 1}, {"message", kNcclTail}}, 2, "lastState");
  ended["metadata"]["annotations"].erase("podshaper.io/shm-size");
  auto none = judgeTerminations(withShmVolume(ended, {{"name", "dshm"}, {"emptyDir", {{"medium", "Memory"}}}}));
  ASSERT_EQ(none.size(), 1u);
  EXPECT_NE(none[0].event.message.find("/dev/shm is the pod's own emptyDir \"dshm\" (medium Memory, no sizeLimit: up "
                                       "to the pod's memory limit), not podshaper's. The volume has no sizeLimit: its "
                                       "pages count against the container's memory limit;"),
            std::string::npos)
      << none[0].event.message;
  EXPECT_NE(none[0].event.message.find("started with less than its size"), std::string::npos);
  auto host = judgeTerminations(withShmVolume(ended, {{"name", "h"}, {"hostPath", {{"path", "/dev/shm"}}}}));
  ASSERT_EQ(host.size(), 1u);
  const std::string& m = host[0].event.message;
  EXPECT_NE(m.find("/dev/shm is the pod's own hostPath \"h\" (the host's /dev/shm), not podshaper's. The host's "
                   "/dev/shm is shared with every pod on the node"),
            std::string::npos)
      << m;
  EXPECT_NE(m.find("/dev/shm is the host's and keeps what earlier runs left"), std::string::npos) << m;
  // Neither a volume nor shm-size: not recorded.
  auto unknown = judgeTerminations(ended);
  ASSERT_EQ(unknown.size(), 1u);
  EXPECT_NE(unknown[0].event.message.find("Its /dev/shm size is not recorded."), std::string::npos);
  // podshaper's own volume is told by shm-size, as before.
  json shaped = withShmVolume(endedPod({{"exitCode", 1}, {"message", kNcclTail}}),
                              {{"name", "podshaper-dshm"}, {"emptyDir", {{"medium", "Memory"}, {"sizeLimit", "161Mi"}}}});
  auto ours = judgeTerminations(shaped);
  ASSERT_EQ(ours.size(), 1u);
  EXPECT_NE(ours[0].event.message.find("/dev/shm was 161Mi, sized by podshaper"), std::string::npos);
}

// What podshaper-shm measured: the ShmUsage of pod-uid's volume `volume`, with `runs`.
constexpr long long kMi = 1 << 20;

json measuredRun(long long n, long long peak, bool ended, long long size = 161 * kMi) {
  json r = {{"run", n},          {"startedAt", "2026-11-26T03:00:00Z"}, {"sizeBytes", size},
            {"peakBytes", peak}, {"peakAt", "2026-11-26T03:04:00Z"},    {"nearlyFull", peak * 10 >= size * 9}};
  if (ended) {
    r["endedAt"] = "2026-11-26T03:05:15Z";
    r["ended"] = "Error (exit 1)";
  }
  return r;
}

json shmUsage(json runs, const std::string& volume = "podshaper-dshm", bool userVolume = false,
              const std::string& uid = "pod-uid") {
  return {{"apiVersion", "podshaper.io/v1alpha1"},
          {"kind", "ShmUsage"},
          {"metadata", {{"name", "train-0"}, {"namespace", "ml"}}},
          {"spec",
           {{"podName", "train-0"},
            {"podUID", uid},
            {"nodeName", "gpu-0"},
            {"volume", volume},
            {"userVolume", userVolume}}},
          {"status",
           {{"sizeBytes", 161 * kMi},
            {"usedBytes", 0},
            {"peakBytes", 161 * kMi},
            {"runCount", runs.size()},
            {"observedAt", "2026-11-26T03:05:16Z"},
            {"runs", runs}}}};
}

const json kPodshapersVolume = {{"name", "podshaper-dshm"},
                                {"emptyDir", {{"medium", "Memory"}, {"sizeLimit", "161Mi"}}}};

TEST(ShmMeasured, AShmUsageOfThePodIsRead) {
  const json pod = endedPod({{"exitCode", 1}});
  auto m = shmMeasured(shmUsage({measuredRun(1, 48 * kMi, true), measuredRun(2, 161 * kMi, false)}), pod);
  ASSERT_TRUE(m);
  EXPECT_EQ(m->volume, "podshaper-dshm");
  EXPECT_FALSE(m->userVolume);
  ASSERT_EQ(m->runs.size(), 2u);
  EXPECT_EQ(m->runs[0].run, 1);
  EXPECT_EQ(m->runs[0].peakBytes, 48u * kMi);
  EXPECT_EQ(m->runs[0].sizeBytes, 161u * kMi);
  EXPECT_TRUE(m->runs[0].ended);
  EXPECT_EQ(m->runs[0].endedAt, 1795662315);  // 2026-11-26T03:05:15Z
  EXPECT_EQ(m->runs[1].run, 2);
  EXPECT_FALSE(m->runs[1].ended);
  EXPECT_EQ(m->runs[1].endedAt, 0);
  auto users = shmMeasured(shmUsage(json::array(), "dshm", true), pod);
  ASSERT_TRUE(users);
  EXPECT_EQ(users->volume, "dshm");
  EXPECT_TRUE(users->userVolume);
}

TEST(ShmMeasured, OneOfNoRunsYetHasNone) {
  const json pod = endedPod({{"exitCode", 1}});
  json noStatus = shmUsage(json::array());
  noStatus.erase("status");  // just made: its status is written next
  json nullRuns = shmUsage(json::array());
  nullRuns["status"]["runs"] = nullptr;
  json noUserVolume = shmUsage(json::array());
  noUserVolume["spec"].erase("userVolume");
  for (const json& u : {shmUsage(json::array()), noStatus, nullRuns, noUserVolume}) {
    auto m = shmMeasured(u, pod);
    ASSERT_TRUE(m) << u;
    EXPECT_TRUE(m->runs.empty()) << u;
    EXPECT_FALSE(m->userVolume) << u;
  }
}

TEST(ShmMeasured, AnotherPodsIsNotRead) {
  const json usage = shmUsage({measuredRun(1, 48 * kMi, true)}, "podshaper-dshm", false, "old-uid");
  EXPECT_FALSE(shmMeasured(usage, endedPod({{"exitCode", 1}})));  // the pod made again under its name
  json noUid = endedPod({{"exitCode", 1}});
  noUid["metadata"].erase("uid");
  EXPECT_FALSE(shmMeasured(shmUsage(json::array(), "podshaper-dshm", false, ""), noUid));
}

TEST(ShmMeasured, AMalformedOneIsNotReadAndNeverThrows) {
  json pod = endedPod({{"exitCode", 1}});
  pod["spec"]["nodeName"] = "gpu-0";  // where the ShmUsage says it was measured
  const json good = shmUsage({measuredRun(1, 48 * kMi, true)});
  struct Case {
    const char* description;
    std::function<void(json&)> spoil;
  } cases[] = {
      {"not an object", [](json& u) { u = "ShmUsage"; }},
      {"null", [](json& u) { u = nullptr; }},
      {"spec an array", [](json& u) { u["spec"] = json::array({1}); }},
      {"podUID a number", [](json& u) { u["spec"]["podUID"] = 7; }},
      {"another node's", [](json& u) { u["spec"]["nodeName"] = "gpu-9"; }},
      {"nodeName a number", [](json& u) { u["spec"]["nodeName"] = 9; }},
      {"no volume", [](json& u) { u["spec"].erase("volume"); }},
      {"volume a number", [](json& u) { u["spec"]["volume"] = 1; }},
      {"userVolume a string", [](json& u) { u["spec"]["userVolume"] = "true"; }},
      {"status a string", [](json& u) { u["status"] = "ok"; }},
      {"runs an object", [](json& u) { u["status"]["runs"] = json::object(); }},
      {"runs a string", [](json& u) { u["status"]["runs"] = "1"; }},
      {"a run a number", [](json& u) { u["status"]["runs"][0] = 1; }},
      {"run 0", [](json& u) { u["status"]["runs"][0]["run"] = 0; }},
      {"run negative", [](json& u) { u["status"]["runs"][0]["run"] = -1; }},
      {"run a string", [](json& u) { u["status"]["runs"][0]["run"] = "1"; }},
      {"no run", [](json& u) { u["status"]["runs"][0].erase("run"); }},
      {"sizeBytes a quantity", [](json& u) { u["status"]["runs"][0]["sizeBytes"] = "161Mi"; }},
      {"peakBytes negative", [](json& u) { u["status"]["runs"][0]["peakBytes"] = -1; }},
      {"peakBytes a fraction", [](json& u) { u["status"]["runs"][0]["peakBytes"] = 1.5; }},
      {"peakBytes past an int64", [](json& u) { u["status"]["runs"][0]["peakBytes"] = UINT64_MAX; }},
      {"sizeBytes the largest int64", [](json& u) { u["status"]["runs"][0]["sizeBytes"] = INT64_MAX; }},
      {"no peakBytes", [](json& u) { u["status"]["runs"][0].erase("peakBytes"); }},
      {"endedAt a number", [](json& u) { u["status"]["runs"][0]["endedAt"] = 5; }},
      {"endedAt not a time", [](json& u) { u["status"]["runs"][0]["endedAt"] = "yesterday"; }},
  };
  ASSERT_TRUE(shmMeasured(good, pod));
  for (const Case& c : cases) {
    json u = good;
    c.spoil(u);
    std::optional<ShmMeasured> m;
    EXPECT_NO_THROW(m = shmMeasured(u, pod)) << c.description;
    EXPECT_FALSE(m) << c.description;
    // Judged with it, the failure is told as without one.
    json died = withShmVolume(endedPod({{"exitCode", 135}}), kPodshapersVolume);
    died["spec"]["nodeName"] = "gpu-0";
    std::vector<ShmFailure> f;
    EXPECT_NO_THROW(f = judgeTerminations(died, {}, &u)) << c.description;
    ASSERT_EQ(f.size(), 1u) << c.description;
    EXPECT_EQ(f[0].event.message.find("podshaper-shm"), std::string::npos) << c.description;
  }
  // The largest byte count read: an int64's in whole Mi.
  json largest = good;
  largest["status"]["runs"][0]["sizeBytes"] = INT64_MAX / kMi * kMi;
  auto m = shmMeasured(largest, pod);
  ASSERT_TRUE(m);
  const json died = withShmVolume(endedPod({{"exitCode", 135}}), kPodshapersVolume);
  auto f = judgeTerminations(died, {}, &largest);
  ASSERT_EQ(f.size(), 1u);
  EXPECT_NE(f[0].event.message.find("peak 48Mi of 8796093022207Mi (0%)."), std::string::npos) << f[0].event.message;
}

TEST(ShmExhausted, TheRunThatDiedIsTheOnePodshaperShmMeasured) {
  // The runs told apart by their peaks: run 1 48Mi, run 2 96Mi, run 3 161Mi.
  const json r1 = measuredRun(1, 48 * kMi, true), r2 = measuredRun(2, 96 * kMi, true);
  const json r2Open = measuredRun(2, 96 * kMi, false), r3Open = measuredRun(3, 161 * kMi, false);
  const json running = {{"running", {{"startedAt", "2026-11-26T03:05:16Z"}}}};
  const json waiting = {{"waiting", {{"reason", "CrashLoopBackOff"}}}};
  const json failed = {{"exitCode", 1}, {"message", kNcclTail}};
  const json terminated = {{"terminated", {{"exitCode", 135}}}};  // a SIGBUS, told apart from the NCCL run before
  struct Case {
    const char* description;
    long long restarts;
    const char* endedIn;  // where the failure is: state or lastState
    json current;         // the container's state, where the failure is in lastState
    json runs;
    const char* told;     // the words told; "": none
  } cases[] = {
      {"ended now, written ended", 0, "state", nullptr, {r1}, "measured run 1 on the node: peak 48Mi"},
      {"ended now, not yet written ended", 1, "state", nullptr, {r1, r2Open}, "measured run 2 on the node: peak 96Mi"},
      {"running again, its run written", 1, "lastState", running, {r1, r2Open},
       "measured run 1 on the node: peak 48Mi"},
      {"running again, its run not yet written", 1, "lastState", running, {r1},
       "measured run 1 on the node: peak 48Mi"},
      {"waiting to run again", 2, "lastState", waiting, {r1, r2}, "measured run 2 on the node: peak 96Mi"},
      {"waiting, its end not yet written", 2, "lastState", waiting, {r1, r2Open},
       "measured run 2 on the node: peak 96Mi"},
      {"ended again since", 2, "lastState", terminated, {r1, r2}, "measured run 1 on the node: peak 48Mi"},
      {"running again, the run before not measured", 2, "lastState", running, {r3Open}, ""},
      {"no runs yet", 0, "state", nullptr, json::array(), ""},
  };
  for (const Case& c : cases) {
    json pod = withShmVolume(endedPod(failed, c.restarts, c.endedIn), kPodshapersVolume);
    json& cs = pod["status"]["containerStatuses"][0];
    if (!c.current.is_null()) cs["state"] = c.current;
    const json usage = shmUsage(c.runs);
    const auto f = judgeTerminations(pod, {}, &usage);
    const auto nccl = std::ranges::find(f, ShmCause::kNccl, &ShmFailure::cause);
    ASSERT_NE(nccl, f.end()) << c.description;
    const std::string& m = nccl->event.message;
    if (*c.told == '\0') {
      EXPECT_EQ(m.find("podshaper-shm measured"), std::string::npos) << c.description << ": " << m;
    } else {
      EXPECT_NE(m.find(std::string("podshaper-shm ") + c.told), std::string::npos) << c.description << ": " << m;
    }
  }
}

TEST(ShmExhausted, WhatPodshaperShmMeasuredFollowsTheSize) {
  const json pod = withShmVolume(endedPod({{"exitCode", 1}, {"message", kNcclTail}}), kPodshapersVolume);
  struct Case {
    long long peak, size;
    const char* words;
  } cases[] = {
      {161 * kMi, 161 * kMi, " podshaper-shm measured run 1 on the node: peak 161Mi of 161Mi (100%)."},
      {100 * kMi + 1, 161 * kMi, " podshaper-shm measured run 1 on the node: peak 101Mi of 161Mi (62%)."},
      {1024 * kMi, 2048 * kMi, " podshaper-shm measured run 1 on the node: peak 1Gi of 2Gi (50%)."},
      {12 * kMi, 0, " podshaper-shm measured run 1 on the node: peak 12Mi."},  // its size unknown
      {0, 161 * kMi, " podshaper-shm measured run 1 on the node: peak 0 of 161Mi (0%)."},
  };
  for (const Case& c : cases) {
    const json usage = shmUsage({measuredRun(1, c.peak, true, c.size)});
    auto f = judgeTerminations(pod, {}, &usage);
    ASSERT_EQ(f.size(), 1u);
    EXPECT_NE(f[0].event.message.find(std::string("/dev/shm was 161Mi, sized by podshaper for what the pod's "
                                                  "annotations say.") + c.words + " NCCL keeps more"),
              std::string::npos)
        << f[0].event.message;
  }
  // The controller's Event says it too.
  const json usage = shmUsage({measuredRun(1, 161 * kMi, true)});
  auto f = judgeTerminations(pod, {}, &usage);
  ASSERT_EQ(f.size(), 1u);
  EXPECT_NE(ownerEvent(pod, f[0]).message.find("peak 161Mi of 161Mi (100%)"), std::string::npos);
}

TEST(ShmExhausted, ARestartedRunOfPodshapersVolumeWatchedByPodshaperShmIsToldItsVolumeIsCleared) {
  const json failed = {{"exitCode", 1}, {"message", kNcclTail}};
  const std::string cleared =
      " This was run 2 of the container in this pod; podshaper-shm clears what a dead run left in podshaper's "
      "/dev/shm before the container starts again, unless its cleaning is off (its ShmLeftoversRemoved Event says "
      "what it removed).";
  const std::string kept = "This was run 2 of the container in this pod: /dev/shm is the pod's emptyDir and keeps what "
                           "earlier runs left";
  const json usersVolume = {{"name", "dshm"}, {"emptyDir", {{"medium", "Memory"}, {"sizeLimit", "1Gi"}}}};
  const json runs = {measuredRun(1, 48 * kMi, true), measuredRun(2, 161 * kMi, true)};
  struct Case {
    const char* description;
    json volume;
    std::optional<json> usage;
    bool clearedTold, measuredTold;
  } cases[] = {
      {"podshaper's volume, watched", kPodshapersVolume, shmUsage(runs), true, true},
      {"podshaper's volume, watched, no run measured yet", kPodshapersVolume, shmUsage(json::array()), true, false},
      {"podshaper's volume, not watched", kPodshapersVolume, std::nullopt, false, false},
      {"podshaper's volume, another pod's ShmUsage", kPodshapersVolume,
       shmUsage(runs, "podshaper-dshm", false, "old-uid"), false, false},
      {"the user's volume, watched", usersVolume, shmUsage(runs, "dshm", true), false, true},
      {"a ShmUsage of another volume", kPodshapersVolume, shmUsage(runs, "dshm", true), false, false},
  };
  for (const Case& c : cases) {
    const json pod = withShmVolume(endedPod(failed, 2, "lastState"), c.volume);
    auto f = judgeTerminations(pod, {}, c.usage ? &*c.usage : nullptr);
    ASSERT_EQ(f.size(), 1u) << c.description;
    EXPECT_TRUE(f[0].restarted);
    const std::string& m = f[0].event.message;
    EXPECT_EQ(m.find(cleared) != std::string::npos, c.clearedTold) << c.description << ": " << m;
    EXPECT_EQ(m.find(kept) != std::string::npos, !c.clearedTold) << c.description << ": " << m;
    EXPECT_EQ(m.find("podshaper-shm measured run 2 on the node: peak 161Mi of 161Mi (100%).") != std::string::npos,
              c.measuredTold)
        << c.description << ": " << m;
  }
  // A first run is told as before: nothing of earlier runs.
  const json usage = shmUsage({measuredRun(1, 161 * kMi, true)});
  auto first = judgeTerminations(withShmVolume(endedPod(failed), kPodshapersVolume), {}, &usage);
  ASSERT_EQ(first.size(), 1u);
  EXPECT_EQ(first[0].event.message.find("This was run"), std::string::npos);
}

TEST(ShmExhausted, TheLongestEventKeepsWhatPodshaperShmMeasured) {
  // SIGBUS with a quoted line (both advices), a restarted run of the user's emptyDir of no
  // sizeLimit and a long formula, told on the controller: its Event is cut at 1024 bytes,
  // the measured sentence early enough to stay.
  json pod = withShmVolume(
      endedPod({{"exitCode", 1}, {"message", "Signal 7 (SIGBUS) received by PID " + std::string(300, '4')}}, 2,
               "lastState"),
      {{"name", "h"}, {"emptyDir", {{"medium", "Memory"}}}});
  pod["metadata"]["annotations"]["podshaper.io/shm-formula"] = std::string(400, 'f');
  const json usage = shmUsage({measuredRun(1, 48 * kMi, true), measuredRun(2, 161 * kMi, true)}, "h", true);
  auto f = judgeTerminations(pod, {}, &usage);
  ASSERT_EQ(f.size(), 1u);
  const json event = eventObject(*controllerOf(pod), ownerEvent(pod, f[0]), "ml", "op-1", 0, 0);
  const std::string message = event["message"];
  EXPECT_LE(message.size(), 1024u);
  EXPECT_NE(message.find("podshaper-shm measured run 2 on the node: peak 161Mi of 161Mi (100%)."), std::string::npos)
      << message;
}

TEST(ShmExhausted, ALongLineIsCut) {
  const std::string longLine = "ERROR: bus error encountered in worker " + std::string(500, 'x');
  auto f = judgeTerminations(endedPod({{"exitCode", 1}, {"message", longLine}}));
  ASSERT_EQ(f.size(), 1u);
  EXPECT_NE(f[0].event.message.find(std::string(150, 'x') + "...\""), std::string::npos);
  EXPECT_EQ(f[0].event.message.find(std::string(300, 'x')), std::string::npos);
}

// The log's last 2 KiB as CI saw it once: the DataLoader's other worker's traceback, printed
// after the training process's Bus error line, pushed that line out of the termination
// message.
std::string workerTracebackTail() {
  std::string tail =
      "56)         # reject large message\n"
      "              ^^^^^^^^^^^^^^^^^^^^^^^^^^\n"
      "  File \"/usr/lib/python3.11/multiprocessing/connection.py\", line 215, in recv_bytes\n"
      "    buf = self._recv_bytes(maxlength)\n"
      "          ^^^^^^^^^^^^^^^^^^^^^^^^^^^\n"
      "  File \"/usr/lib/python3.11/multiprocessing/connection.py\", line 413, in _recv_bytes\n"
      "    buf = self._recv(4)\n"
      "          ^^^^^^^^^^^^^\n"
      "  File \"/usr/lib/python3.11/multiprocessing/connection.py\", line 378, in _recv\n"
      "    chunk = read(handle, remaining)\n"
      "            ^^^^^^^^^^^^^^^^^^^^^^^\n"
      "ConnectionResetError: [Errno 104] Connection reset by peer\n"
      "rank 0: exit code 1\ntraining failed: 1 rank(s)\n";
  while (tail.size() < 2048) tail = "  File \"/usr/lib/python3/dist-packages/torch/utils/data/_utils/worker.py\"\n" + tail;
  return tail.substr(tail.size() - 2048);
}

TEST(ShmExhausted, ACutTailThatNamesNoCauseAsksForTheLog) {
  const std::string tail = workerTracebackTail();
  const json pod = endedPod({{"exitCode", 1}, {"reason", "Error"}, {"message", tail}});
  EXPECT_TRUE(judgeTerminations(pod).empty());
  auto asks = logsToRead(pod);
  ASSERT_EQ(asks.size(), 1u);
  EXPECT_EQ(asks[0].container, "trainer");
  EXPECT_FALSE(asks[0].previous);
  EXPECT_EQ(asks[0].key, "pod-uid/trainer/0");

  const std::string log = "torch 1.13.1, 1 rank(s), /dev/shm 161 MiB\n"
                          "ERROR: Unexpected bus error encountered in worker. This might be caused by insufficient "
                          "shared memory (shm).\n"
                          "Traceback (most recent call last):\n" + tail;
  const std::string evidence = shmEvidence(log);
  EXPECT_EQ(evidence,
            "ERROR: Unexpected bus error encountered in worker. This might be caused by insufficient shared memory "
            "(shm).\n");
  auto f = judgeTerminations(pod, {{asks[0].key, evidence}});
  ASSERT_EQ(f.size(), 1u);
  EXPECT_EQ(f[0].cause, ShmCause::kDataLoader);
  EXPECT_NE(f[0].event.message.find("(\"ERROR: Unexpected bus error encountered in worker."), std::string::npos);
  // A log that names no cause either: nothing is blamed.
  EXPECT_TRUE(judgeTerminations(pod, {{asks[0].key, shmEvidence(tail)}}).empty());
}

TEST(ShmExhausted, TheLogIsAskedOnlyWhereTheTailWasCutAndNamesNoCause) {
  const std::string tail = workerTracebackTail();
  // A whole log (short), the OOM killer, a clean end, a tail that names its cause.
  EXPECT_TRUE(logsToRead(endedPod({{"exitCode", 1}, {"reason", "Error"}, {"message", "ValueError: bad\n"}})).empty());
  EXPECT_TRUE(logsToRead(endedPod({{"exitCode", 137}, {"reason", "OOMKilled"}, {"message", tail}})).empty());
  EXPECT_TRUE(logsToRead(endedPod({{"exitCode", 0}, {"reason", "Completed"}, {"message", tail}})).empty());
  EXPECT_TRUE(logsToRead(endedPod({{"exitCode", 1}, {"reason", "Error"}, {"message", tail + kNcclTail}})).empty());
  // 80 short lines are a cut too; the run before the current one is read with previous.
  std::string lines;
  for (int i = 0; i < 80; ++i) lines += "step " + std::to_string(i) + "\n";
  auto asks = logsToRead(endedPod({{"exitCode", 1}, {"reason", "Error"}, {"message", lines}}, 3, "lastState"));
  ASSERT_EQ(asks.size(), 1u);
  EXPECT_TRUE(asks[0].previous);
  EXPECT_EQ(asks[0].key, "pod-uid/trainer/2");
}

TEST(ShmExhausted, TheControllerIsToldWithThePodsName) {
  const json pod = endedPod({{"exitCode", 135}});
  auto owner = controllerOf(pod);
  ASSERT_TRUE(owner);
  EXPECT_EQ(owner->kind, "Job");
  EXPECT_EQ(owner->uid, "job-uid");
  auto f = judgeTerminations(pod);
  ASSERT_EQ(f.size(), 1u);
  EXPECT_EQ(ownerEvent(pod, f[0]).message.rfind("Pod ml/train-0: Container \"trainer\" ran out of /dev/shm", 0), 0u);
  json orphan = pod;
  orphan["metadata"].erase("ownerReferences");
  EXPECT_FALSE(controllerOf(orphan));
}

}  // namespace
}  // namespace podshaper
