#include "operator/pod_reconciler.h"

#include <gtest/gtest.h>

#include "base/timefmt.h"
#include "operator/caches.h"
#include "tests/unit/operator/fake_reconcile_api.h"

namespace podshaper::op {
namespace {

// A shaped node-exclusive pod of 8 GPUs, created `age` seconds before the clock's now.
json waitingPod(long long age) {
  return {{"metadata",
           {{"name", "train-1"},
            {"namespace", "ml"},
            {"uid", "pod-uid"},
            {"creationTimestamp", formatTime(kNow - age)},
            {"labels", {{"podshaper.io/placement", "node-exclusive"}}}}},
          {"spec",
           {{"nodeSelector", {{"podshaper.io/gpu-count", "8"}}}}},
          {"status", {{"phase", "Pending"}}}};
}

NodeFacts fourGpuNode() {
  NodeFacts n;
  n.node.name = "a";
  n.node.labels = {{"podshaper.io/gpu-count", "4"}, {"podshaper.io/topology-validated", "true"}};
  return n;
}

json failedPod(long long restarts, const char* state, const std::string& message) {
  json cs = {{"name", "trainer"}, {"restartCount", restarts}};
  cs[state]["terminated"] = {{"exitCode", 1}, {"message", message}};
  return {{"metadata",
           {{"name", "train-0"},
            {"namespace", "ml"},
            {"uid", "pod-uid"},
            {"annotations", {{"podshaper.io/shm-size", "161Mi"}}},
            {"ownerReferences",
             {{{"apiVersion", "batch/v1"}, {"kind", "Job"}, {"name", "train"}, {"uid", "job-uid"}, {"controller", true}}}}}},
          {"spec", {{"nodeName", "a"}}},
          {"status", {{"phase", "Running"}, {"containerStatuses", {cs}}}}};
}

const std::string kNccl =
    "misc/shmutils.cc:132 NCCL WARN Error while creating shared memory segment /dev/shm/nccl-4PshbB (size 34210176), "
    "error: No space left on device (28)";

class PodReconcilerTest : public ::testing::Test {
 protected:
  FakeReconcileApi api;
  FakeClock clock;
  metrics::Registry registry;
  bool leader = true;
  std::vector<NodeFacts> nodes{fourGpuNode()};
  int nodesAsked = 0;
  PodReconciler reconciler{api, clock, registry, [this] { return leader; },
                           {.identity = "op-1", .pendingGrace = std::chrono::seconds(30)}};

  Reconciler::Result reconcile(const std::optional<json>& pod) {
    return reconciler.reconcile("ml/train", pod, [this] {
      ++nodesAsked;
      return std::make_shared<const std::vector<NodeFacts>>(nodes);
    });
  }
};

TEST_F(PodReconcilerTest, APendingPodIsToldOnceAfterTheGraceAndAgainWhenWhatStopsItChanges) {
  auto r = reconcile(waitingPod(10));
  EXPECT_EQ(r.outcome, Reconciler::Outcome::Done);
  EXPECT_EQ(r.requeueAfter, std::chrono::seconds(20));
  EXPECT_TRUE(api.events().empty());

  r = reconcile(waitingPod(40));
  ASSERT_EQ(api.events().size(), 1u);
  EXPECT_EQ(api.writes().back(), "event Warning NotPlaceable on Pod in ml");
  EXPECT_EQ(api.events()[0]["involvedObject"]["uid"], "pod-uid");
  EXPECT_EQ(api.events()[0]["metadata"]["namespace"], "ml");
  EXPECT_EQ(api.events()[0]["involvedObject"]["namespace"], "ml");  // the API server refuses one without
  EXPECT_NE(api.events()[0]["message"].get<std::string>().find("1 does not have 8 GPUs (4 GPUs: a)"),
            std::string::npos);
  EXPECT_EQ(r.requeueAfter, std::chrono::seconds(30));

  reconcile(waitingPod(70));  // same answer, a longer wait: not told again
  EXPECT_EQ(api.events().size(), 1u);

  // The node now has 8 GPUs: podshaper's requirements are met, the scheduler's turn (another
  // cause), told at once.
  nodes[0].node.labels = {{"podshaper.io/gpu-count", "8"}};
  reconcile(waitingPod(100));
  ASSERT_EQ(api.events().size(), 2u);
  EXPECT_NE(api.events()[1]["message"].get<std::string>().find("1 node meets all of it (a)"), std::string::npos)
      << api.events()[1]["message"];
  const std::string rendered = registry.render();
  EXPECT_NE(rendered.find("podshaper_operator_pod_events_total{cause=\"gpu-count\",reason=\"NotPlaceable\"} 1"),
            std::string::npos)
      << rendered;
  EXPECT_NE(rendered.find("podshaper_operator_pod_events_total{cause=\"scheduler\",reason=\"NotPlaceable\"} 1"),
            std::string::npos);
}

TEST_F(PodReconcilerTest, NewWordsForTheSameCauseAreToldAtMostEveryTenMinutes) {
  reconcile(waitingPod(40));
  ASSERT_EQ(api.events().size(), 1u);
  nodes.push_back(fourGpuNode());  // "Of 2 nodes": other words, the same cause
  nodes.back().node.name = "b";
  clock.advance(60);
  reconcile(waitingPod(100));
  EXPECT_EQ(api.events().size(), 1u);
  clock.advance(600);
  reconcile(waitingPod(700));
  ASSERT_EQ(api.events().size(), 2u);
  EXPECT_NE(api.events()[1]["message"].get<std::string>().find("Of 2 nodes"), std::string::npos);
}

TEST_F(PodReconcilerTest, EverySeriesStartsAtZero) {
  // An alert on increase() sees a series' first Event only when the series was there before it.
  const std::string rendered = registry.render();
  for (const char* series : {"{cause=\"gpu-count\",reason=\"NotPlaceable\"} 0", "{cause=\"scheduler\",reason=\"NotPlaceable\"} 0",
                             "{cause=\"dataloader\",reason=\"ShmExhausted\"} 0", "{cause=\"nccl\",reason=\"ShmExhausted\"} 0",
                             "{cause=\"sigbus\",reason=\"ShmExhausted\"} 0",
                             "{cause=\"device\",reason=\"RejectedByKubelet\"} 0",
                             "{cause=\"other\",reason=\"RejectedByKubelet\"} 0"}) {
    EXPECT_NE(rendered.find(std::string("podshaper_operator_pod_events_total") + series), std::string::npos)
        << series << " in " << rendered;
  }
  EXPECT_NE(rendered.find("# HELP podshaper_operator_pod_events_total Events that explain"), std::string::npos);
}

TEST_F(PodReconcilerTest, APendingPodInItsGraceOrGatedDoesNotReadTheNodes) {
  reconcile(waitingPod(10));
  json gated = waitingPod(100);
  gated["spec"]["schedulingGates"] = {{{"name", "kueue.x-k8s.io/admission"}}};
  reconcile(gated);
  EXPECT_EQ(nodesAsked, 0);
  reconcile(waitingPod(100));
  EXPECT_EQ(nodesAsked, 1);
}

TEST_F(PodReconcilerTest, APodMadeAgainUnderItsNameForgetsTheEarlierOne) {
  reconcile(failedPod(1, "lastState", kNccl));
  json again = failedPod(1, "lastState", kNccl);
  again["metadata"]["uid"] = "pod-uid-2";  // deleted and made again before a look saw it gone
  reconcile(again);
  EXPECT_EQ(api.writes().size(), 3u);  // told for the new pod; the Job once
  reconcile(failedPod(1, "lastState", kNccl));  // the first uid's memories are gone: told again
  EXPECT_EQ(api.writes().size(), 4u);
}

TEST_F(PodReconcilerTest, ABoundPodDoesNotReadTheNodes) {
  reconcile(failedPod(0, "state", "fine"));
  EXPECT_EQ(nodesAsked, 0);
  EXPECT_TRUE(api.events().empty());
}

TEST_F(PodReconcilerTest, ShmExhaustedIsToldOnThePodAndOnceOnItsJob) {
  reconcile(failedPod(1, "lastState", kNccl));  // its first run ended
  ASSERT_EQ(api.writes().size(), 2u);
  EXPECT_EQ(api.writes()[0], "event Warning ShmExhausted on Pod in ml");
  EXPECT_EQ(api.writes()[1], "event Warning ShmExhausted on Job in ml");
  EXPECT_EQ(api.events()[1]["involvedObject"]["uid"], "job-uid");
  EXPECT_EQ(api.events()[1]["involvedObject"]["namespace"], "ml");
  EXPECT_EQ(api.events()[1]["message"].get<std::string>().rfind("Pod ml/train-0: Container \"trainer\" ran out", 0),
            0u);

  reconcile(failedPod(1, "lastState", kNccl));  // the same failure, seen again
  EXPECT_EQ(api.writes().size(), 2u);

  reconcile(failedPod(2, "lastState", kNccl));  // its second run ended too: told on the pod only
  ASSERT_EQ(api.writes().size(), 3u);
  EXPECT_EQ(api.writes()[2], "event Warning ShmExhausted on Pod in ml");
  EXPECT_NE(api.events()[2]["message"].get<std::string>().find("keeps what earlier runs left"), std::string::npos);
  EXPECT_NE(registry.render().find("podshaper_operator_pod_events_total{cause=\"nccl\",reason=\"ShmExhausted\"} 2"),
            std::string::npos)
      << registry.render();
}

// The pod as the operator's cache keeps it: the trainer's /dev/shm is podshaper's volume.
json withPodshapersShm(json pod) {
  pod["spec"]["containers"] = json::parse(R"([{"name": "trainer",
      "volumeMounts": [{"name": "podshaper-dshm", "mountPath": "/dev/shm"}]}])");
  pod["spec"]["volumes"] = json::parse(R"([{"name": "podshaper-dshm",
      "emptyDir": {"medium": "Memory", "sizeLimit": "161Mi"}}])");
  return pod;
}

// podshaper-shm's ShmUsage of train-0: its runs 1 and 2 ended, run 2 at 161Mi of 161Mi.
json shmUsageOfTrain0() {
  return json::parse(R"json({
    "apiVersion": "podshaper.io/v1alpha1", "kind": "ShmUsage",
    "metadata": {"name": "train-0", "namespace": "ml"},
    "spec": {"podName": "train-0", "podUID": "pod-uid", "nodeName": "a", "volume": "podshaper-dshm",
             "userVolume": false},
    "status": {"sizeBytes": 168820736, "usedBytes": 0, "peakBytes": 168820736, "runCount": 2, "runs": [
      {"run": 1, "startedAt": "2026-11-21T23:00:00Z", "endedAt": "2026-11-21T23:10:00Z", "sizeBytes": 168820736,
       "peakBytes": 50331648, "nearlyFull": false, "ended": "Error (exit 1)"},
      {"run": 2, "startedAt": "2026-11-21T23:10:01Z", "endedAt": "2026-11-21T23:20:00Z", "sizeBytes": 168820736,
       "peakBytes": 168820736, "nearlyFull": true, "ended": "Error (exit 1)"}]}})json");
}

TEST_F(PodReconcilerTest, APodTheKubeletFailedAtAdmissionIsToldOnceOnThePod) {
  // As the kubelet leaves it after it restarted before the GPU device plugin registered
  // again, and as the pod cache keeps it.
  json pod = failedPod(0, "state", "");
  pod["metadata"]["labels"]["podshaper.io/shaped"] = "true";
  pod["spec"]["nodeName"] = "real-h200x4-0";
  pod["status"]["phase"] = "Failed";
  pod["status"]["reason"] = "UnexpectedAdmissionError";
  pod["status"]["message"] =
      "Pod was rejected: Allocate failed due to no healthy devices present; cannot allocate unhealthy devices "
      "nvidia.com/gpu, which is unexpected";
  compactPod(pod);
  reconcile(pod);
  ASSERT_EQ(api.writes().size(), 1u) << api.writes().back();
  EXPECT_EQ(api.writes()[0], "event Warning RejectedByKubelet on Pod in ml");
  EXPECT_EQ(api.events()[0]["involvedObject"]["uid"], "pod-uid");
  EXPECT_EQ(api.events()[0]["message"].get<std::string>().rfind(
                "The kubelet of node real-h200x4-0 failed this pod at admission: \"Allocate failed due to no healthy "
                "devices present; cannot allocate unhealthy devices nvidia.com/gpu, which is unexpected\". It names "
                "the device resource nvidia.com/gpu, which the kubelet did not have registered then",
                0),
            0u)
      << api.events()[0]["message"];
  EXPECT_NE(api.events()[0]["message"].get<std::string>().find("Its controller (Job train) makes a new pod"),
            std::string::npos);

  reconcile(pod);  // seen again
  EXPECT_EQ(api.writes().size(), 1u);
  EXPECT_NE(
      registry.render().find("podshaper_operator_pod_events_total{cause=\"device\",reason=\"RejectedByKubelet\"} 1"),
      std::string::npos)
      << registry.render();

  // Another reason the pod failed with: nothing.
  json evicted = pod;
  evicted["metadata"]["uid"] = "uid-2";
  evicted["status"]["reason"] = "Evicted";
  compactPod(evicted);
  reconcile(evicted);
  EXPECT_EQ(api.writes().size(), 1u);
}

TEST_F(PodReconcilerTest, ShmExhaustedSaysWhatPodshaperShmMeasured) {
  api.put(shmUsagePath("ml", "train-0"), shmUsageOfTrain0());
  const json pod = withPodshapersShm(failedPod(2, "lastState", kNccl));  // its second run died
  EXPECT_EQ(reconcile(pod).outcome, Reconciler::Outcome::Done);
  EXPECT_EQ(api.shmUsageReads(), (std::vector<std::string>{"ml/train-0"}));
  ASSERT_EQ(api.events().size(), 2u);
  for (const json& e : api.events()) {
    const std::string m = e["message"];
    EXPECT_NE(m.find("podshaper-shm measured run 2 on the node: peak 161Mi of 161Mi (100%)."), std::string::npos) << m;
    EXPECT_NE(m.find("This was run 2 of the container in this pod; podshaper-shm clears what a dead run left"),
              std::string::npos)
        << m;
    EXPECT_EQ(m.find("keeps what earlier runs left"), std::string::npos) << m;
  }
  reconcile(pod);  // all told: not read again
  EXPECT_EQ(api.shmUsageReads().size(), 1u);
  EXPECT_EQ(api.events().size(), 2u);
}

TEST_F(PodReconcilerTest, AShmUsageThatCannotBeReadIsNone) {
  api.put(shmUsagePath("ml", "train-0"), shmUsageOfTrain0());
  api.fail("GET", shmUsagePath("ml", "train-0"), 403, "Forbidden");
  EXPECT_EQ(reconcile(withPodshapersShm(failedPod(2, "lastState", kNccl))).outcome, Reconciler::Outcome::Done);
  ASSERT_EQ(api.events().size(), 2u);
  const std::string m = api.events()[0]["message"];
  EXPECT_EQ(m.find("podshaper-shm"), std::string::npos) << m;
  EXPECT_NE(m.find("keeps what earlier runs left"), std::string::npos) << m;
}

TEST_F(PodReconcilerTest, OnlyAFailureLeftToTellReadsTheShmUsage) {
  reconcile(waitingPod(40));
  reconcile(withPodshapersShm(failedPod(0, "state", "fine")));
  EXPECT_TRUE(api.shmUsageReads().empty());
  reconcile(withPodshapersShm(failedPod(1, "lastState", kNccl)));  // none: 404
  EXPECT_EQ(api.shmUsageReads().size(), 1u);
  EXPECT_EQ(api.events().back()["reason"], "ShmExhausted");
  EXPECT_EQ(api.events().back()["message"].get<std::string>().find("podshaper-shm"), std::string::npos);
}

TEST_F(PodReconcilerTest, AStandbyTellsNothingAndAFailedWriteIsRetried) {
  leader = false;
  EXPECT_EQ(reconcile(failedPod(1, "lastState", kNccl)).outcome, Reconciler::Outcome::NotLeader);
  EXPECT_TRUE(api.writes().empty());
  leader = true;
  api.fail("POST", eventsPath("ml"), 500, "InternalError");
  EXPECT_EQ(reconcile(failedPod(1, "lastState", kNccl)).outcome, Reconciler::Outcome::Retry);
  EXPECT_TRUE(api.events().empty());
  EXPECT_EQ(reconcile(failedPod(1, "lastState", kNccl)).outcome, Reconciler::Outcome::Done);
  EXPECT_EQ(api.writes().size(), 2u);  // the pod's and the Job's, each once
}

TEST_F(PodReconcilerTest, AJobWhoseEventFailedIsToldOnTheNextLook) {
  api.fail("POST", eventsPath("ml"), 500, "InternalError", 1, "etcd is slow",
                  [](const json& e) { return e["involvedObject"]["kind"] == "Job"; });
  reconcile(failedPod(1, "lastState", kNccl));
  ASSERT_EQ(api.writes().size(), 1u);  // the pod's; the Job's failed
  EXPECT_EQ(reconcile(failedPod(1, "lastState", kNccl)).outcome, Reconciler::Outcome::Done);
  ASSERT_EQ(api.writes().size(), 2u);
  EXPECT_EQ(api.writes()[1], "event Warning ShmExhausted on Job in ml");
}

// A pod whose trainer ended with a termination message cut at 2 KiB that names no cause.
json cutTailPod(long long restarts = 0, const char* state = "state") {
  std::string tail;
  while (tail.size() < 2048) tail += "ConnectionResetError: [Errno 104] Connection reset by peer\n";
  json pod = failedPod(restarts, state, tail.substr(tail.size() - 2048));
  pod["status"]["containerStatuses"][0][state]["terminated"]["reason"] = "Error";
  return pod;
}

const std::string kLog = podPath("ml", "train-0") + "/log";

const std::string kBusErrorLog =
    "ERROR: Unexpected bus error encountered in worker. This might be caused by insufficient shared memory (shm).\n"
    "ConnectionResetError: [Errno 104] Connection reset by peer\n";

TEST_F(PodReconcilerTest, ACutTailIsJudgedFromTheLogReadOnce) {
  api.putLog(podPath("ml", "train-0"), "trainer", kBusErrorLog);
  reconcile(cutTailPod());
  EXPECT_EQ(api.logReads(), (std::vector<std::string>{"ml/train-0/trainer"}));
  ASSERT_EQ(api.writes().size(), 2u);  // the pod and its Job
  EXPECT_NE(api.events()[0]["message"].get<std::string>().find("a PyTorch DataLoader worker could not put its batch"),
            std::string::npos);
  reconcile(cutTailPod());
  EXPECT_EQ(api.logReads().size(), 1u);
  EXPECT_EQ(api.writes().size(), 2u);
}

TEST_F(PodReconcilerTest, AnEventThatFailedIsRetriedWithoutReadingTheLogAgain) {
  api.putLog(podPath("ml", "train-0"), "trainer", kBusErrorLog, /*previous=*/true);
  api.fail("POST", eventsPath("ml"), 500, "InternalError");
  EXPECT_EQ(reconcile(cutTailPod(1, "lastState")).outcome, Reconciler::Outcome::Retry);
  EXPECT_EQ(reconcile(cutTailPod(1, "lastState")).outcome, Reconciler::Outcome::Done);
  EXPECT_EQ(api.logReads(), (std::vector<std::string>{"ml/train-0/trainer/previous"}));
  EXPECT_EQ(api.writes().size(), 2u);
}

TEST_F(PodReconcilerTest, ALogThatCannotBeReadLeavesTheTailsJudgement) {
  reconcile(cutTailPod());  // 404: its log is gone
  EXPECT_TRUE(api.writes().empty());
  reconcile(cutTailPod());
  EXPECT_EQ(api.logReads().size(), 1u);  // not asked again
  // pods/log not granted: asked once, never again.
  api.fail("GET", kLog, 403, "Forbidden");
  json other = cutTailPod();
  other["metadata"]["uid"] = "uid-2";
  reconcile(other);
  other["metadata"]["uid"] = "uid-3";
  reconcile(other);
  EXPECT_EQ(api.logReads().size(), 2u);
  EXPECT_TRUE(api.writes().empty());
}

TEST_F(PodReconcilerTest, ALogReadThatFailedForNowIsTriedAgain) {
  api.fail("GET", kLog, 503, "ServiceUnavailable");
  EXPECT_EQ(reconcile(cutTailPod()).outcome, Reconciler::Outcome::Retry);
  EXPECT_TRUE(api.writes().empty());
  api.putLog(podPath("ml", "train-0"), "trainer", kBusErrorLog);
  EXPECT_EQ(reconcile(cutTailPod()).outcome, Reconciler::Outcome::Done);
  EXPECT_EQ(api.logReads().size(), 2u);
  EXPECT_EQ(api.writes().size(), 2u);  // the pod and its Job
}

TEST_F(PodReconcilerTest, AForbiddenLogIsAskedAgainAfterTenMinutes) {
  api.fail("GET", kLog, 403, "Forbidden");
  reconcile(cutTailPod());
  json other = cutTailPod();
  other["metadata"]["uid"] = "uid-2";
  reconcile(other);
  EXPECT_EQ(api.logReads().size(), 1u);
  clock.advance(601);
  api.putLog(podPath("ml", "train-0"), "trainer", kBusErrorLog);
  reconcile(other);
  EXPECT_EQ(api.logReads().size(), 2u);
  EXPECT_EQ(api.writes().size(), 2u);
}

TEST_F(PodReconcilerTest, AGonePodIsForgotten) {
  reconcile(failedPod(1, "lastState", kNccl));
  reconcile(std::nullopt);
  reconcile(failedPod(1, "lastState", kNccl));  // a pod of the same uid again (a test's stand-in): told again
  EXPECT_EQ(api.writes().size(), 3u);  // the Job only once
}

}  // namespace
}  // namespace podshaper::op
