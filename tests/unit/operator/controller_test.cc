// The operator's controllers over caches in memory and the in-memory API, driven on the
// test's thread: what the watches would bring is followed from the fake API's objects, and
// the queues' due keys are reconciled by drain(); the queues' clock is the test's.
#include "operator/controller.h"

#include <gtest/gtest.h>

#include "tests/unit/operator/fake_reconcile_api.h"
#include "tests/unit/operator/memory_cache.h"

namespace podshaper::op {
namespace {

using nlohmann::json;

json policyObject() {
  return {{"apiVersion", "podshaper.io/v1alpha1"},
          {"kind", "TopologyPolicy"},
          {"metadata", {{"name", "default"}}},
          {"spec",
           {{"nodeSelector", json::object()},
            {"requirements",
             {{"requireP2PAllPairs", true}, {"requireMemlockUnlimited", true}, {"maxReportAge", "10m"}}}}}};
}

// Of the objects under `prefix`, those `keep` accepts (a watch's selector).
std::map<std::string, json> selected(const std::map<std::string, json>& objects,
                                     const std::function<bool(const std::string&, const json&)>& keep) {
  std::map<std::string, json> out;
  for (const auto& [path, object] : objects) {
    if (keep(path, object)) out.emplace(path, object);
  }
  return out;
}

class ControllerTest : public ::testing::Test {
 protected:
  FakeReconcileApi api;
  FakeClock clock;
  metrics::Registry registry;
  bool leader = true;
  MemoryCache reports{compactReport}, nodes{compactNode}, policies, pods{compactPod}, shmUsages{compactShmUsage},
      shmProfiles{compactShmProfile};
  Controllers controllers{{reports, nodes, policies, pods, shmUsages, shmProfiles},
                          api,
                          clock,
                          registry,
                          [this] { return leader; },
                          OperatorConfig{},
                          "operator-0",
                          clock.queueNow()};

  void SetUp() override { api.put(policyPath("default"), policyObject()); }

  // What the watches would bring: each cache brought to what the API holds, and the
  // controllers told what changed. True when anything did.
  bool watch() {
    const auto r = reports.follow(api.objectsUnder(kube::resourcePath(names::kGroupVersion, names::kReportResource) + "/"));
    const auto n = nodes.follow(api.objectsUnder("/api/v1/nodes/"));
    const auto p = policies.follow(api.objectsUnder(kube::resourcePath(names::kGroupVersion, names::kPolicyResource) + "/"));
    const auto s = pods.follow(selected(api.objectsUnder("/api/v1/namespaces/"), [](const std::string& path, const json& o) {
      return path.find("/pods/") != std::string::npos &&
             o["metadata"].value("labels", json::object()).value(std::string(names::kShapedLabel), "") == "true";
    }));
    const auto u = shmUsages.follow(selected(api.objectsUnder("/apis/"),
                                             [](const std::string& path, const json&) {
                                               return path.find("/shmusages/") != std::string::npos;
                                             }));
    if (!r.empty()) controllers.reportsOrNodesChanged(r);
    if (!n.empty()) controllers.reportsOrNodesChanged(n);
    if (!p.empty()) controllers.policiesChanged();
    if (!s.empty()) controllers.podsChanged(s);
    if (!u.empty()) controllers.shmUsagesChanged(u);
    return !r.empty() || !n.empty() || !p.empty() || !s.empty() || !u.empty();
  }
  // The caches synced, then every due key reconciled and every write watched, until quiet.
  void start() {
    watch();
    controllers.cachesSynced();
    settle();
  }
  void settle() {
    for (int i = 0; i < 20; ++i) {
      const bool changed = watch();
      if (controllers.drain() == 0 && !changed) return;
    }
    ADD_FAILURE() << "the controllers did not settle";
  }
  // A second at a time, as the queues would see it pass.
  void advance(long long seconds) {
    for (long long i = 0; i < seconds; ++i) {
      clock.advance(1);
      settle();
    }
  }
  std::string label(std::string_view key) const {
    const json node = api.node();
    return node.is_null() ? "" : node["metadata"]["labels"].value(std::string(key), "");
  }
  int countOf(const std::string& write) const {
    int n = 0;
    for (const auto& w : api.writes()) n += w == write;
    return n;
  }
  std::string metricsText() const { return registry.render(); }
};

TEST_F(ControllerTest, AReportIsJudgedItsNodeLabelledAndThePolicyToldThenNothingIsWritten) {
  api.putNode(nodeObject(8));
  api.putReport(reportObject(TopologyBuilder(8).spec(clock.wall - 5)));
  start();
  EXPECT_EQ(label(names::kTopologyValidated), "true") << api.node().dump();
  EXPECT_EQ(label(names::kP2P), "all");
  EXPECT_EQ(api.report()["status"]["conditions"][0]["status"], "True");
  // The policy's status follows the labels within kPolicyStatusGap.
  advance(2);
  EXPECT_EQ(api.object(policyPath("default")).value()["status"].value("validatedNodes", 0), 1);
  // Steady: the watches bring the operator's own writes back, and nothing more is written.
  api.clearWrites();
  advance(20);
  EXPECT_EQ(api.writes(), std::vector<std::string>{});
}

TEST_F(ControllerTest, AChangedReportComesThroughTheWatchAndIsToldOnce) {
  api.putNode(nodeObject(8));
  api.putReport(reportObject(TopologyBuilder(8).spec(clock.wall - 5)));
  start();
  ASSERT_EQ(label(names::kTopologyValidated), "true");
  api.clearWrites();
  json lost = api.report();
  lost["spec"] = TopologyBuilder(8).pair(2, 5, "NV18", "NS").spec(clock.wall - 1);
  api.putReport(lost);
  settle();
  EXPECT_EQ(label(names::kP2P), "partial") << api.node().dump();
  EXPECT_EQ(label(names::kTopologyValidated), "false");
  EXPECT_EQ(countOf("event Warning P2PUnavailable on Node in default"), 1);
  advance(3);
  EXPECT_EQ(countOf("event Warning P2PUnavailable on Node in default"), 1);
  EXPECT_EQ(countOf("status gpu-0"), 1);
}

TEST_F(ControllerTest, AConflictIsRetriedByTheQueue) {
  api.putNode(nodeObject(8));
  api.putReport(reportObject(TopologyBuilder(8).spec(clock.wall - 5)));
  api.fail("PATCH", nodePath("gpu-0") + "/status", 409, "Conflict", 2);
  start();
  EXPECT_NE(label(names::kTopologyValidated), "true");  // waits for its backoff
  advance(1);
  advance(1);
  EXPECT_EQ(label(names::kTopologyValidated), "true");
  int refused = 0;
  for (const auto& call : api.calls()) refused += call.code == 409;
  EXPECT_EQ(refused, 2);
  EXPECT_NE(metricsText().find("podshaper_operator_reconciles_total{controller=\"report\",result=\"error\"} 2"),
            std::string::npos)
      << metricsText();
  EXPECT_EQ(countOf("status gpu-0"), 1);  // the status went in the first time: not written again
}

TEST_F(ControllerTest, AReportIsJudgedAgainWhenItGoesStale) {
  api.putNode(nodeObject(8));
  // Observed 592 s ago: fresh for 8 s more (maxReportAge 10m), then the queue brings it back.
  api.putReport(reportObject(TopologyBuilder(8).spec(clock.wall - 592)));
  start();
  ASSERT_EQ(label(names::kTopologyValidated), "true");
  advance(8);
  EXPECT_EQ(label(names::kTopologyValidated), "true");
  advance(1);
  EXPECT_EQ(label(names::kTopologyValidated), "false") << api.report().dump();
  const json report = api.report();
  bool staleSaid = false;
  for (const json& c : report["status"]["conditions"]) staleSaid |= c["reason"] == "ReportStale";
  EXPECT_TRUE(staleSaid) << report["status"].dump();
}

TEST_F(ControllerTest, AStandbyWritesNothingUntilItLeads) {
  leader = false;
  api.putNode(nodeObject(8));
  api.putReport(reportObject(TopologyBuilder(8).spec(clock.wall - 5)));
  start();
  advance(20);
  EXPECT_TRUE(api.writes().empty());
  EXPECT_NE(metricsText().find("podshaper_operator_reconciles_total{controller=\"report\",result=\"not_leader\"} 1"),
            std::string::npos)
      << metricsText();
  leader = true;
  controllers.enqueueAll();  // what the operator does on taking the lease
  settle();
  EXPECT_EQ(label(names::kTopologyValidated), "true");
  advance(2);
  EXPECT_EQ(api.object(policyPath("default")).value()["status"].value("validatedNodes", 0), 1);
}

TEST_F(ControllerTest, ThePoliciesStatusIsLookedAtSoonAfterAChangeAtMostOnceEveryTwoSeconds) {
  api.putNode(nodeObject(8));
  api.putReport(reportObject(TopologyBuilder(8).spec(clock.wall - 5)));
  start();
  advance(16);  // the policy's own status written and come back: its last look long ago
  auto looks = [this] {
    const std::string series = "podshaper_operator_reconciles_total{controller=\"policy-status\",result=\"ok\"} ";
    const std::string text = metricsText();
    const auto at = text.find(series);
    return at == std::string::npos ? -1 : std::stoi(text.substr(at + series.size()));
  };
  auto editNode = [this](int i) {
    json node = api.node();
    node["metadata"]["labels"]["edited"] = std::to_string(i);
    api.putNode(node);
    settle();
  };
  const int before = looks();
  ASSERT_GT(before, 0);
  editNode(0);  // looked at at once
  EXPECT_EQ(looks(), before + 1);
  editNode(1);  // two more changes: one look, kPolicyStatusGap after the last
  editNode(2);
  advance(1);
  EXPECT_EQ(looks(), before + 1);
  advance(1);
  EXPECT_EQ(looks(), before + 2);
  advance(14);  // then every kPolicyStatusPeriod without a change
  EXPECT_EQ(looks(), before + 2);
  advance(1);
  EXPECT_EQ(looks(), before + 3);
}

// A shaped pod on gpu-0 whose container podshaper-shm holds back (held) or that runs.
json memlockPod(const std::string& name, bool held) {
  json cs = {{"name", "train"}, {"restartCount", 0}};
  if (held) {
    cs["state"]["waiting"] = {
        {"reason", "CreateContainerError"},
        {"message", "failed to create containerd container: MemlockNotApplied: node gpu-0 did not apply "
                    "RLIMIT_MEMLOCK 4Mi that ulimits.noderesource.dev/container.train asks (it would get 8Mi, the "
                    "runtime's default). podshaper-shm holds the container back until the node applies it."}};
  } else {
    cs["state"]["running"] = {{"startedAt", formatTime(kNow)}};
  }
  const json labels = {{std::string(names::kShapedLabel), "true"}};
  return json{{"metadata", {{"name", name}, {"namespace", "ml"}, {"labels", labels}}},
              {"spec", {{"nodeName", "gpu-0"}}},
              {"status", {{"phase", held ? "Pending" : "Running"}, {"containerStatuses", {cs}}}}};
}

TEST_F(ControllerTest, APodHeldForItsMemlockTakesItsNodeOffValidatedAndBackOn) {
  // The webhook's memlock 4Mi, which the node applied when the agent probed it.
  json policy = policyObject();
  policy["spec"]["requirements"]["requireMemlockUnlimited"] = false;
  api.put(policyPath("default"), policy);
  api.putNode(nodeObject(8));
  api.putReport(reportObject(
      TopologyBuilder(8).memlock(4 << 20).memlockProbe(MemlockLimit{4 << 20}, true).spec(clock.wall - 5)));
  api.put(podPath("ml", "train-0"), memlockPod("train-0", false));
  start();
  ASSERT_EQ(label(names::kTopologyValidated), "true") << api.report().dump();
  ASSERT_EQ(label(names::kMemlock), "4194304");
  api.clearWrites();

  // The plugin stopped: the kubelet shows the pod's new container held back.
  api.put(podPath("ml", "train-1"), memlockPod("train-1", true));
  settle();
  EXPECT_EQ(label(names::kTopologyValidated), "false") << api.node().dump();
  EXPECT_EQ(label(names::kMemlock), "not-applied");
  const json condition = api.node()["status"]["conditions"][0];
  EXPECT_EQ(condition["type"], "GPUTopologyValidated");
  EXPECT_EQ(condition["reason"], "MemlockNotApplied");
  EXPECT_NE(condition["message"].get<std::string>().find("podshaper-shm holds back 1 shaped pod here"),
            std::string::npos)
      << condition.dump();
  EXPECT_EQ(api.report()["status"]["memlock"], "not-applied");
  EXPECT_EQ(countOf("event Warning MemlockNotApplied on GPUTopologyReport in default"), 1);
  EXPECT_EQ(countOf("event Warning MemlockNotApplied on Node in default"), 1);
  EXPECT_EQ(countOf("status gpu-0"), 1);

  // Another pod's change, not held: nothing is judged again, nothing written (once the
  // policy's status has followed the flip).
  advance(3);
  api.clearWrites();
  auto reportLooks = [this] {
    const std::string series = "podshaper_operator_reconciles_total{controller=\"report\",result=\"ok\"} ";
    const std::string text = metricsText();
    const auto at = text.find(series);
    return at == std::string::npos ? -1 : std::stoi(text.substr(at + series.size()));
  };
  const int looks = reportLooks();
  json other = memlockPod("train-0", false);
  other["status"]["containerStatuses"][0]["restartCount"] = 1;
  api.put(podPath("ml", "train-0"), other);
  advance(3);
  EXPECT_EQ(api.writes(), std::vector<std::string>{});
  EXPECT_EQ(reportLooks(), looks);

  // The plugin runs again: the held container starts, and the node is validated again.
  api.put(podPath("ml", "train-1"), memlockPod("train-1", false));
  settle();
  EXPECT_EQ(label(names::kTopologyValidated), "true") << api.node().dump();
  EXPECT_EQ(label(names::kMemlock), "4194304");
  EXPECT_EQ(api.node()["status"]["conditions"][0]["reason"], "RequirementsMet");
  EXPECT_EQ(countOf("event Normal TopologyValidated on GPUTopologyReport in default"), 1);

  // Held again, then the held pod deleted: validated again too.
  api.put(podPath("ml", "train-1"), memlockPod("train-1", true));
  settle();
  ASSERT_EQ(label(names::kMemlock), "not-applied");
  ASSERT_TRUE(api.remove(podPath("ml", "train-1")));
  settle();
  EXPECT_EQ(label(names::kMemlock), "4194304");
  EXPECT_EQ(label(names::kTopologyValidated), "true");
}

json shmPod(const std::string& name, bool shaped) {
  json cs = {{"name", "trainer"}, {"restartCount", 1}};
  cs["lastState"]["terminated"] = {
      {"exitCode", 1},
      {"message",
       "misc/shmutils.cc:132 NCCL WARN Error while creating shared memory segment /dev/shm/nccl-4PshbB (size "
       "34210176), error: No space left on device (28)"}};
  json labels = json::object();
  if (shaped) labels[std::string(names::kShapedLabel)] = "true";
  return json{{"metadata",
               {{"name", name},
                {"namespace", "ml"},
                {"labels", labels},
                {"annotations", {{std::string(names::kShmSize), "161Mi"}}}}},
              {"spec", {{"nodeName", "gpu-0"}}},
              {"status", {{"phase", "Running"}, {"containerStatuses", {cs}}}}};
}

TEST_F(ControllerTest, AShapedPodThatRanOutOfShmIsToldOnItsOwnQueue) {
  api.put(podPath("ml", "train-0"), shmPod("train-0", true));
  api.put(podPath("ml", "other-0"), shmPod("other-0", false));  // not the webhook's: not watched
  start();
  EXPECT_EQ(countOf("event Warning ShmExhausted on Pod in ml"), 1);
  advance(20);
  ASSERT_EQ(api.events().size(), 1u);
  EXPECT_EQ(api.events()[0]["involvedObject"]["name"], "train-0");
  EXPECT_NE(metricsText().find("podshaper_operator_reconciles_total{controller=\"pod\",result=\"ok\"}"),
            std::string::npos);
}

TEST_F(ControllerTest, TheShmExhaustedEventNamesAVolumeOfThePodsOwn) {
  // The cache keeps a shaped pod compacted: its container's /dev/shm mount and that
  // volume stay, so that the Event says which /dev/shm ran out.
  json cs = {{"name", "trainer"}, {"restartCount", 0}};
  cs["state"]["terminated"] = {{"exitCode", 1},
                               {"message", "NCCL WARN Error while creating shared memory segment /dev/shm/nccl-4PshbB "
                                           "(size 34210176), error: No space left on device (28)"}};
  json pod = {{"metadata",
               {{"name", "train-0"},
                {"namespace", "ml"},
                {"labels", {{std::string(names::kShapedLabel), "true"}}},
                {"annotations", {{std::string(names::kShmFormula), "... = 2223Mi needed"}}}}},
              {"spec",
               {{"nodeName", "gpu-0"},
                {"containers",
                 {{{"name", "trainer"},
                   {"image", "pytorch"},
                   {"volumeMounts", {{{"name", "data"}, {"mountPath", "/data"}}, {{"name", "dshm"}, {"mountPath", "/dev/shm"}}}}}}},
                {"volumes",
                 {{{"name", "data"}, {"persistentVolumeClaim", {{"claimName", "data"}}}},
                  {{"name", "dshm"}, {"emptyDir", {{"medium", "Memory"}, {"sizeLimit", "1Gi"}}}}}}}},
              {"status", {{"phase", "Failed"}, {"containerStatuses", {cs}}}}};
  api.put(podPath("ml", "train-0"), pod);
  start();
  ASSERT_EQ(countOf("event Warning ShmExhausted on Pod in ml"), 1);
  const std::string message = api.events()[0]["message"];
  EXPECT_NE(message.find("/dev/shm is the pod's own emptyDir \"dshm\" (medium Memory, sizeLimit 1Gi), not podshaper's"),
            std::string::npos)
      << message;
}

TEST_F(ControllerTest, AShapedPodsEndedRunGoesToItsWorkloadsProfile) {
  json pod = shmPod("train-0", true);
  pod["metadata"]["uid"] = "uid-0";
  pod["metadata"]["annotations"][std::string(names::kShmProfile)] = "job.train; ranks=1; inputs=3f9a0c12";
  pod["status"]["phase"] = "Succeeded";
  pod["status"]["containerStatuses"][0] = {{"name", "trainer"}, {"restartCount", 0}};
  pod["status"]["containerStatuses"][0]["state"]["terminated"] = {{"exitCode", 0}, {"finishedAt", formatTime(kNow)}};
  api.put(podPath("ml", "train-0"), pod);
  start();
  EXPECT_FALSE(api.object(shmProfilePath("ml", "job.train")));  // nothing measured yet
  // podshaper-shm's end of the run, through the ShmUsages' watch.
  json run = {{"run", 1}, {"startedAt", formatTime(kNow - 60)}, {"endedAt", formatTime(kNow + 1)},
              {"sizeBytes", 161 << 20}, {"peakBytes", 48 << 20}};
  api.put(shmUsagePath("ml", "train-0"),
          {{"metadata", {{"name", "train-0"}, {"namespace", "ml"}}},
           {"spec", {{"podName", "train-0"}, {"podUID", "uid-0"}, {"nodeName", "gpu-0"}, {"volume", "podshaper-dshm"}}},
           {"status", {{"runs", {run}}}}});
  settle();
  const auto profile = api.object(shmProfilePath("ml", "job.train"));
  ASSERT_TRUE(profile);
  EXPECT_EQ((*profile)["status"]["runs"][0]["end"], "Completed");
  EXPECT_NE(metricsText().find("podshaper_operator_reconciles_total{controller=\"shm-profile\",result=\"ok\"}"),
            std::string::npos);
}

}  // namespace
}  // namespace podshaper::op
