#include "judging/pod_plan.h"

#include <functional>
#include <optional>

#include <gtest/gtest.h>

#include "base/timefmt.h"

namespace podshaper {
namespace {

using json = nlohmann::json;

constexpr long long kNow = 1795305600;  // 2026-11-22T00:00:00Z
constexpr long long kGrace = 30;
const std::string kKey = "ml/train";

// A shaped node-exclusive pod of 8 GPUs, created `age` seconds before kNow.
json waitingPod(long long age) {
  json pod = json::parse(R"({
    "metadata": {"name": "train-1", "namespace": "ml", "uid": "pod-uid",
                 "labels": {"podshaper.io/placement": "node-exclusive"}},
    "spec": {"nodeSelector": {"podshaper.io/gpu-count": "8"}},
    "status": {"phase": "Pending"}})");
  pod["metadata"]["creationTimestamp"] = formatTime(kNow - age);
  return pod;
}

NodeFacts gpuNode(const std::string& name, const std::string& gpus) {
  NodeFacts n;
  n.node.name = name;
  n.node.labels = {{"podshaper.io/gpu-count", gpus}, {"podshaper.io/topology-validated", "true"}};
  return n;
}

// A pod of Job "train" whose trainer's first run ended as `message` says.
json endedPod(const std::string& message, const std::string& uid = "pod-uid", const std::string& reason = "") {
  json terminated = {{"exitCode", 1}, {"message", message}};
  if (!reason.empty()) terminated["reason"] = reason;
  const json status = {{"name", "trainer"}, {"restartCount", 1}, {"lastState", {{"terminated", terminated}}}};
  return {{"metadata",
           {{"name", "train-0"},
            {"namespace", "ml"},
            {"uid", uid},
            {"annotations", {{"podshaper.io/shm-size", "161Mi"}}},
            {"ownerReferences",
             {{{"apiVersion", "batch/v1"}, {"kind", "Job"}, {"name", "train"}, {"uid", "job-uid"}, {"controller", true}}}}}},
          {"spec", {{"nodeName", "a"}}},
          {"status", {{"phase", "Running"}, {"containerStatuses", json::array({status})}}}};
}

const std::string kNccl =
    "misc/shmutils.cc:132 NCCL WARN Error while creating shared memory segment /dev/shm/nccl-4PshbB (size 34210176), "
    "error: No space left on device (28)";

// A termination message cut at 2 KiB that names no cause: the log is asked for.
json cutTailPod(const std::string& uid = "pod-uid") {
  std::string tail;
  while (tail.size() < 2048) tail += "ConnectionResetError: [Errno 104] Connection reset by peer\n";
  return endedPod(tail.substr(tail.size() - 2048), uid, "Error");
}

const std::string kBusErrorLog =
    "ERROR: Unexpected bus error encountered in worker. This might be caused by insufficient shared memory (shm).\n";

using Answer = std::function<LogRead(const LogToRead&)>;
using Refuse = std::function<bool(const PodTell&)>;

struct Look {
  PodAsks asks{};
  PodPlan plan{};
  std::vector<std::string> told{};  // "reason on kind", as told
};

// One look as the reconciler makes it: the logs asked for answered by `answer` (none: 404),
// every Event written unless `refuse` says, and what was told remembered.
Look look(PodMemories& memories, const json& pod, long long now, const std::vector<NodeFacts>& nodes = {},
          const Answer& answer = nullptr, const Refuse& refuse = nullptr) {
  const auto owner = controllerOf(pod);
  const std::string uid = pod["metadata"]["uid"];
  const ToldState told = memories.look(kKey, uid, owner ? owner->uid : "");
  Look l{.asks = podAsks(pod, told, now, kGrace)};
  std::map<std::string, LogRead> reads;
  for (const LogToRead& ask : l.asks.logs) reads[ask.key] = answer ? answer(ask) : LogRead{LogRead::Kind::Gone, ""};
  l.plan = planPod({.pod = &pod, .told = &told, .asks = &l.asks, .reads = &reads, .nodes = &nodes, .now = now,
                    .graceSeconds = kGrace});
  memories.learn(kKey, uid, l.plan.learnt);
  std::vector<bool> done(l.plan.tells.size());
  for (std::size_t i = 0; i < l.plan.tells.size(); ++i) {
    const PodTell& t = l.plan.tells[i];
    if ((t.after && !done[*t.after]) || std::ranges::any_of(t.unless, [&](std::size_t j) { return done[j]; })) continue;
    if (refuse && refuse(t)) continue;
    done[i] = true;
    l.told.push_back(t.event.reason + " on " + t.about.kind);
    memories.remember(kKey, uid, t.remember);
  }
  return l;
}

LogRead readAs(const std::string& text) { return {LogRead::Kind::Read, text}; }

TEST(PodPlan, APendingPodIsToldAfterItsGraceOnce) {
  PodMemories memories;
  const std::vector<NodeFacts> nodes{gpuNode("a", "4")};
  Look l = look(memories, waitingPod(10), kNow, nodes);
  EXPECT_FALSE(l.asks.nodes);  // in its grace: the nodes are not read
  EXPECT_TRUE(l.told.empty());
  EXPECT_EQ(l.plan.lookAgainAfter, 20);

  l = look(memories, waitingPod(40), kNow, nodes);
  EXPECT_TRUE(l.asks.nodes);
  ASSERT_EQ(l.told, (std::vector<std::string>{"NotPlaceable on Pod"}));
  EXPECT_EQ(l.plan.tells[0].cause, "gpu-count");
  EXPECT_EQ(l.plan.tells[0].about.uid, "pod-uid");
  EXPECT_EQ(l.plan.tells[0].about.ns, "ml");
  ASSERT_TRUE(memories.pods[kKey].toldPending);
  EXPECT_EQ(memories.pods[kKey].toldPending->at, kNow);

  l = look(memories, waitingPod(70), kNow + 30, nodes);  // the same answer, a longer wait
  EXPECT_TRUE(l.told.empty());
}

// What was told of a waiting pod at kNow, against what it would be told later.
TEST(PodPlan, ANotPlaceableIsToldAgainForANewCauseAtOnceAndNewWordsAfterTenMinutes) {
  PodMemories first;
  ASSERT_EQ(look(first, waitingPod(40), kNow, {gpuNode("a", "4")}).told.size(), 1u);
  const std::vector<NodeFacts> sameWords{gpuNode("a", "4")};
  const std::vector<NodeFacts> newWords{gpuNode("a", "4"), gpuNode("b", "4")};  // "Of 2 nodes": the same cause
  const std::vector<NodeFacts> newCause{gpuNode("a", "8")};                     // the scheduler's turn
  struct Case {
    const char* description;
    long long after;
    const std::vector<NodeFacts>* nodes;
    bool told;
  } cases[] = {
      {"the same words, long after", 3600, &sameWords, false},
      {"new words a minute after", 60, &newWords, false},
      {"new words just before ten minutes", kRetellAfterSeconds - 1, &newWords, false},
      {"new words ten minutes after", kRetellAfterSeconds, &newWords, true},
      {"a new cause a second after", 1, &newCause, true},
  };
  for (const Case& c : cases) {
    PodMemories memories = first;
    const Look l = look(memories, waitingPod(40 + c.after), kNow + c.after, *c.nodes);
    EXPECT_EQ(l.told.size(), c.told ? 1u : 0u) << c.description;
    if (c.told) {
      EXPECT_EQ(memories.pods[kKey].toldPending->at, kNow + c.after) << c.description;
    }
  }
}

TEST(PodPlan, APodThatNoLongerWaitsForgetsItsNotPlaceable) {
  PodMemories memories;
  look(memories, waitingPod(40), kNow, {gpuNode("a", "4")});
  json bound = waitingPod(50);
  bound["spec"]["nodeName"] = "a";
  bound["status"]["phase"] = "Running";
  const Look l = look(memories, bound, kNow + 10);
  EXPECT_TRUE(l.plan.learnt.forgetPending);
  EXPECT_FALSE(l.plan.lookAgainAfter);
  EXPECT_FALSE(memories.pods[kKey].toldPending);
}

TEST(PodPlan, AFailureIsToldOnThePodOnceAndItsControllerOnceAcrossItsPods) {
  PodMemories memories;
  Look l = look(memories, endedPod(kNccl), kNow);
  ASSERT_EQ(l.told, (std::vector<std::string>{"ShmExhausted on Pod", "ShmExhausted on Job"}));
  EXPECT_EQ(l.plan.tells[0].cause, "nccl");
  EXPECT_EQ(l.plan.tells[0].container, "trainer");
  EXPECT_TRUE(l.plan.tells[1].cause.empty());  // a controller's is not counted
  EXPECT_EQ(l.plan.tells[1].after, 0u);
  EXPECT_EQ(l.plan.tells[1].about.uid, "job-uid");
  EXPECT_EQ(l.plan.tells[1].event.message.rfind("Pod ml/train-0: ", 0), 0u);

  EXPECT_TRUE(look(memories, endedPod(kNccl), kNow + 60).told.empty());  // seen again

  // Another pod of the same Job (another key): the pod only.
  const std::string otherKey = "ml/train-other";
  const json other = endedPod(kNccl, "uid-2");
  const ToldState told = memories.look(otherKey, "uid-2", "job-uid");
  EXPECT_TRUE(told.ownerTold);
  const PodAsks asks = podAsks(other, told, kNow, kGrace);
  const PodPlan p = planPod({.pod = &other, .told = &told, .asks = &asks, .now = kNow, .graceSeconds = kGrace});
  ASSERT_EQ(p.tells.size(), 1u);
  EXPECT_EQ(p.tells[0].about.kind, "Pod");
}

TEST(PodPlan, APodTheKubeletFailedAtAdmissionIsToldOnThePodOnce) {
  json pod = endedPod("");
  pod["metadata"]["labels"]["podshaper.io/shaped"] = "true";
  pod["status"] = {{"phase", "Failed"},
                   {"reason", "UnexpectedAdmissionError"},
                   {"message", "Pod was rejected: Allocate failed due to no healthy devices present; cannot allocate "
                               "unhealthy devices nvidia.com/gpu, which is unexpected"}};
  PodMemories memories;
  Look l = look(memories, pod, kNow);
  ASSERT_EQ(l.told, (std::vector<std::string>{"RejectedByKubelet on Pod"}));  // not on its controller
  EXPECT_EQ(l.plan.tells[0].cause, "device");
  EXPECT_EQ(l.plan.tells[0].about.uid, "pod-uid");
  EXPECT_FALSE(l.asks.shmUsage);
  EXPECT_TRUE(look(memories, pod, kNow + 60).told.empty());  // seen again

  // A failed write is told on the next look.
  PodMemories refused;
  EXPECT_TRUE(look(refused, pod, kNow, {}, nullptr, [](const PodTell&) { return true; }).told.empty());
  EXPECT_EQ(look(refused, pod, kNow + 5).told, (std::vector<std::string>{"RejectedByKubelet on Pod"}));

  // The same name made again (another uid) is told anew; another failure reason is not told.
  pod["metadata"]["uid"] = "uid-2";
  EXPECT_EQ(look(memories, pod, kNow + 120).told, (std::vector<std::string>{"RejectedByKubelet on Pod"}));
  pod["metadata"]["uid"] = "uid-3";
  pod["status"]["reason"] = "Evicted";
  EXPECT_TRUE(look(memories, pod, kNow + 180).told.empty());
}

TEST(PodPlan, TheShmUsageIsAskedForOnlyWhileAFailureMayBeLeftToTell) {
  json completed = endedPod(kNccl);
  completed["status"]["containerStatuses"][0]["lastState"]["terminated"]["exitCode"] = 0;
  const Refuse refuseJob = [](const PodTell& t) { return t.about.kind == "Job"; };
  struct Case {
    const char* description;
    json pod;
    std::optional<Refuse> toldBefore;  // a look before, its tells refused where this says
    bool asked;
  } cases[] = {
      {"a waiting pod", waitingPod(40), std::nullopt, false},
      {"a run that completed", completed, std::nullopt, false},
      {"a run that failed of something else", endedPod("ValueError: bad"), std::nullopt, false},
      {"a run that died of /dev/shm", endedPod(kNccl), std::nullopt, true},
      {"a cut tail: its log to read", cutTailPod(), std::nullopt, true},
      {"told on the pod and its Job", endedPod(kNccl), Refuse([](const PodTell&) { return false; }), false},
      {"told on the pod, its Job's refused", endedPod(kNccl), refuseJob, true},
  };
  for (const Case& c : cases) {
    PodMemories memories;
    if (c.toldBefore) look(memories, c.pod, kNow, {}, nullptr, *c.toldBefore);
    EXPECT_EQ(look(memories, c.pod, kNow + 1, {gpuNode("a", "4")}).asks.shmUsage, c.asked) << c.description;
  }
}

TEST(PodPlan, AFailureIsToldWithWhatPodshaperShmMeasured) {
  json pod = endedPod(kNccl);
  pod["spec"]["containers"] = json::parse(R"([{"name": "trainer",
      "volumeMounts": [{"name": "podshaper-dshm", "mountPath": "/dev/shm"}]}])");
  pod["spec"]["volumes"] = json::parse(R"([{"name": "podshaper-dshm",
      "emptyDir": {"medium": "Memory", "sizeLimit": "161Mi"}}])");
  const json usage = json::parse(R"json({
    "spec": {"podName": "train-0", "podUID": "pod-uid", "nodeName": "a", "volume": "podshaper-dshm",
             "userVolume": false},
    "status": {"runs": [
      {"run": 1, "startedAt": "2026-11-21T23:00:00Z", "endedAt": "2026-11-21T23:10:00Z", "sizeBytes": 168820736,
       "peakBytes": 168820736, "nearlyFull": true, "ended": "Error (exit 1)"},
      {"run": 2, "startedAt": "2026-11-21T23:10:01Z", "sizeBytes": 168820736, "peakBytes": 1048576}]}})json");
  PodMemories memories;
  const ToldState told = memories.look(kKey, "pod-uid", "job-uid");
  const PodAsks asks = podAsks(pod, told, kNow, kGrace);
  ASSERT_TRUE(asks.shmUsage);
  const std::string measured = "podshaper-shm measured run 1 on the node: peak 161Mi of 161Mi (100%).";
  // Its first run died; the container runs again (run 2, open).
  pod["status"]["containerStatuses"][0]["state"] = {{"running", {{"startedAt", "2026-11-21T23:10:01Z"}}}};
  const PodPlan plan = planPod({.pod = &pod, .told = &told, .asks = &asks, .shmUsage = &usage, .now = kNow,
                                .graceSeconds = kGrace});
  ASSERT_EQ(plan.tells.size(), 2u);
  EXPECT_NE(plan.tells[0].event.message.find(measured), std::string::npos) << plan.tells[0].event.message;
  EXPECT_NE(plan.tells[1].event.message.find(measured), std::string::npos);  // its Job's
  const PodPlan none = planPod({.pod = &pod, .told = &told, .asks = &asks, .now = kNow, .graceSeconds = kGrace});
  ASSERT_EQ(none.tells.size(), 2u);
  EXPECT_EQ(none.tells[0].event.message.find("podshaper-shm"), std::string::npos);
}

TEST(PodPlan, AFailedTellIsNotRememberedAndIsToldOnTheNextLook) {
  const Refuse refuseAll = [](const PodTell&) { return true; };
  const Refuse refuseJob = [](const PodTell& t) { return t.about.kind == "Job"; };
  struct Case {
    const char* description;
    Refuse refuse;
    std::vector<std::string> thenTold;
  } cases[] = {
      {"every write refused", refuseAll, {"ShmExhausted on Pod", "ShmExhausted on Job"}},
      {"the Job's refused", refuseJob, {"ShmExhausted on Job"}},
  };
  for (const Case& c : cases) {
    PodMemories memories;
    look(memories, endedPod(kNccl), kNow, {}, nullptr, c.refuse);
    EXPECT_EQ(look(memories, endedPod(kNccl), kNow + 1).told, c.thenTold) << c.description;
  }
}

TEST(PodPlan, TheOwnerIsToldOfTheFirstFailureToldOnly) {
  json pod = endedPod(kNccl);
  json second = pod["status"]["containerStatuses"][0];
  second["name"] = "sidecar";
  pod["status"]["containerStatuses"].push_back(second);
  PodMemories memories;
  Look l = look(memories, pod, kNow, {}, nullptr,
                [](const PodTell& t) { return t.about.kind == "Pod" && t.container == "trainer"; });
  // The trainer's refused: the Job hears of the sidecar's.
  ASSERT_EQ(l.told, (std::vector<std::string>{"ShmExhausted on Pod", "ShmExhausted on Job"}));
  ASSERT_EQ(l.plan.tells.size(), 4u);
  EXPECT_EQ(l.plan.tells[3].unless, (std::vector<std::size_t>{1}));
  EXPECT_EQ(look(memories, pod, kNow + 1).told, (std::vector<std::string>{"ShmExhausted on Pod"}));
}

TEST(PodPlan, ALogIsReadOnceAndItsEvidenceReused) {
  PodMemories memories;
  int reads = 0;
  const Answer answer = [&](const LogToRead&) {
    ++reads;
    return readAs(kBusErrorLog + "Traceback\n");
  };
  Look l = look(memories, cutTailPod(), kNow, {}, answer, [](const PodTell&) { return true; });
  ASSERT_EQ(l.asks.logs.size(), 1u);
  EXPECT_EQ(l.asks.logs[0].key, "pod-uid/trainer/0");
  EXPECT_EQ(l.plan.learnt.logEvidence.at("pod-uid/trainer/0"), kBusErrorLog);  // only the lines that name a cause
  EXPECT_EQ(l.plan.tells.size(), 2u);  // each refused

  l = look(memories, cutTailPod(), kNow + 1, {}, answer);
  EXPECT_EQ(reads, 1);
  EXPECT_TRUE(l.asks.logs.empty());
  EXPECT_EQ(l.asks.known.size(), 1u);
  EXPECT_EQ(l.told.size(), 2u);
  EXPECT_NE(l.plan.tells[0].event.message.find("a PyTorch DataLoader worker"), std::string::npos);
}

TEST(PodPlan, LogsAnsweredSoAreRememberedOrAskedAgain) {
  struct Case {
    const char* description;
    LogRead::Kind kind;
    bool remembered, forbidden, readFailed;
  } cases[] = {
      {"read", LogRead::Kind::Read, true, false, false},
      {"gone (404): judged from the message", LogRead::Kind::Gone, true, false, false},
      {"forbidden (403)", LogRead::Kind::Forbidden, false, true, false},
      {"failed for now", LogRead::Kind::Failed, false, false, true},
  };
  for (const Case& c : cases) {
    PodMemories memories;
    const Look l = look(memories, cutTailPod(), kNow, {}, [&](const LogToRead&) { return LogRead{c.kind, "x"}; });
    EXPECT_EQ(memories.pods[kKey].logEvidence.size(), c.remembered ? 1u : 0u) << c.description;
    EXPECT_EQ(memories.logsForbiddenAt.has_value(), c.forbidden) << c.description;
    EXPECT_EQ(l.plan.readFailed, c.readFailed) << c.description;
  }
}

TEST(PodPlan, AForbiddenLogIsNotAskedForTenMinutes) {
  PodMemories memories;
  look(memories, cutTailPod(), kNow, {}, [](const LogToRead&) { return LogRead{LogRead::Kind::Forbidden, ""}; });
  EXPECT_EQ(memories.logsForbiddenAt, kNow);
  struct Case {
    const char* description;
    long long after;
    std::size_t asked;
  } cases[] = {{"a second after", 1, 0}, {"just before ten minutes", kLogsForbiddenSeconds - 1, 0},
               {"ten minutes after", kLogsForbiddenSeconds, 1}};
  for (const Case& c : cases) {
    // Another pod's: the window is the operator's, not the pod's.
    const ToldState told = memories.look("ml/other", "uid-2", "job-uid");
    EXPECT_EQ(podAsks(cutTailPod("uid-2"), told, kNow + c.after, kGrace).logs.size(), c.asked) << c.description;
  }
}

TEST(PodPlan, RunsNoLongerListedForgetTheirEvidence) {
  PodMemories memories;
  memories.look(kKey, "pod-uid", "job-uid");
  memories.pods[kKey].logEvidence = {{"pod-uid/trainer/0", kBusErrorLog}, {"pod-uid/trainer/7", "old"}};
  const Look l = look(memories, cutTailPod(), kNow);
  EXPECT_TRUE(l.asks.logs.empty());
  EXPECT_EQ(memories.pods[kKey].logEvidence.size(), 1u);
  EXPECT_TRUE(memories.pods[kKey].logEvidence.contains("pod-uid/trainer/0"));
}

TEST(PodPlan, AGonePodOrOneMadeAgainUnderItsNameIsForgotten) {
  struct Case {
    const char* description;
    std::function<void(PodMemories&)> between;
    std::string uid;
  } cases[] = {
      {"gone", [](PodMemories& m) { m.forget(kKey); }, "pod-uid"},
      {"made again", [](PodMemories&) {}, "pod-uid-2"},
  };
  for (const Case& c : cases) {
    PodMemories memories;
    look(memories, endedPod(kNccl), kNow);
    c.between(memories);
    // The pod is told again; its Job, a controller's memory, not.
    EXPECT_EQ(look(memories, endedPod(kNccl, c.uid), kNow + 1).told, (std::vector<std::string>{"ShmExhausted on Pod"}))
        << c.description;
  }
}

TEST(PodPlan, ControllersRememberedAreBounded) {
  PodMemories memories;
  for (std::size_t i = 0; i < kMaxOwnersRemembered; ++i) memories.toldOwners.insert("job-" + std::to_string(i));
  memories.remember(kKey, "pod-uid", {.owner = "job-uid"});
  EXPECT_EQ(memories.toldOwners, (std::set<std::string>{"job-uid"}));
}

}  // namespace
}  // namespace podshaper
