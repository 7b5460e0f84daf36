#include "judging/shm_exhausted.h"

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
