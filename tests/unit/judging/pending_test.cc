#include "judging/pending.h"

#include <gtest/gtest.h>

#include "api/node_labels.h"

namespace podshaper {
namespace {

using json = nlohmann::json;

constexpr long long kCreated = 1795000000;  // 2026-11-17T…
const std::string kCreatedText = "2026-11-18T11:06:40Z";

// A node-exclusive pod of `gpus` GPUs with the node requirements the webhook writes
// (api/node_labels.h; config memlock 4Mi: two terms).
json pendingPod(uint64_t gpus = 8) {
  json terms = json::array();
  for (const auto& term : nodeRequirements({MemlockLimit{4194304}, gpus, false})) {
    json expressions = json::array();
    for (const NodeRequirement& r : term) expressions.push_back(r.toJson());
    terms.push_back({{"matchExpressions", expressions}});
  }
  return {{"metadata",
           {{"name", "train-1"},
            {"namespace", "ml"},
            {"uid", "pod-uid"},
            {"creationTimestamp", kCreatedText},
            {"labels", {{"podshaper.io/placement", "node-exclusive"}, {"podshaper.io/shaped", "true"}}}}},
          {"spec",
           {{"affinity",
             {{"nodeAffinity", {{"requiredDuringSchedulingIgnoredDuringExecution",
                                 {{"nodeSelectorTerms", terms}}}}}}}}},
          {"status",
           {{"phase", "Pending"},
            {"conditions",
             {{{"type", "PodScheduled"},
               {"status", "False"},
               {"reason", "Unschedulable"},
               {"message", "0/3 nodes are available: 3 Insufficient nvidia.com/gpu."}}}}}}};
}

NodeFacts node(const std::string& name, int gpus, const std::string& validated = "true",
               const std::string& memlock = "unlimited") {
  NodeFacts f;
  f.node.name = name;
  f.node.allocatableGpus = gpus;
  if (!validated.empty()) {
    f.node.labels = {{"podshaper.io/topology-validated", validated},
                {"podshaper.io/gpu-count", std::to_string(gpus)},
                {"podshaper.io/memlock", memlock}};
  }
  return f;
}

const long long kLater = kCreated + 45;

TEST(Pending, WithinTheGraceItOnlyLooksAgainAtItsEnd) {
  auto j = judgePending(pendingPod(), {node("a", 8)}, kCreated + 10, 30);
  EXPECT_TRUE(j.pending);
  EXPECT_FALSE(j.event);
  ASSERT_TRUE(j.lookAgainAfter);
  EXPECT_EQ(*j.lookAgainAfter, 20);
}

TEST(Pending, AScheduledOrFinishedPodIsNotPending) {
  json bound = pendingPod();
  bound["spec"]["nodeName"] = "a";
  EXPECT_FALSE(judgePending(bound, {}, kLater, 30).pending);
  json done = pendingPod();
  done["status"]["phase"] = "Failed";
  EXPECT_FALSE(judgePending(done, {}, kLater, 30).pending);
  json going = pendingPod();
  going["metadata"]["deletionTimestamp"] = kCreatedText;
  EXPECT_FALSE(judgePending(going, {}, kLater, 30).event);
}

TEST(Pending, AGatedPodIsNotExplained) {
  json gated = pendingPod();
  gated["spec"]["schedulingGates"] = {{{"name", "kueue.x-k8s.io/admission"}}};
  auto j = judgePending(gated, {node("a", 4)}, kLater, 30);
  EXPECT_TRUE(j.pending);
  EXPECT_FALSE(j.event);
  EXPECT_EQ(j.lookAgainAfter, 30);
}

TEST(Pending, APodReleasedFromItsGatesWaitsFromThen) {
  json released = pendingPod();
  released["status"]["conditions"][0]["lastTransitionTime"] = "2026-11-18T11:07:15Z";  // 35 s after creation
  auto j = judgePending(released, {node("a", 4)}, kLater, 30);  // 10 s after it
  EXPECT_FALSE(j.event);
  EXPECT_EQ(j.lookAgainAfter, 20);
}

TEST(Pending, AClusterWithoutNodesSaysSo) {
  auto j = judgePending(pendingPod(), {}, kLater, 30);
  ASSERT_TRUE(j.event);
  EXPECT_NE(j.event->message.find("The cluster has no node."), std::string::npos) << j.event->message;
}

TEST(Pending, NoNodeOfItsSizeSaysWhichSizesExist) {
  auto j = judgePending(pendingPod(), {node("a", 4), node("b", 4), node("c", 2, "")}, kLater, 30);
  ASSERT_TRUE(j.event);
  EXPECT_EQ(j.event->type, "Warning");
  EXPECT_EQ(j.event->reason, "NotPlaceable");
  const std::string& m = j.event->message;
  EXPECT_EQ(m.rfind("Pending for 45s: no node can take this pod now.", 0), 0u) << m;
  EXPECT_NE(m.find("It needs a node that has 8 GPUs (podshaper.io/gpu-count=8), is validated by podshaper "
                   "(podshaper.io/topology-validated=true), grants memlock at least 4Mi or unlimited "
                   "(podshaper.io/memlock) and runs no other node-exclusive pod."),
            std::string::npos)
      << m;
  EXPECT_NE(m.find("Of 3 nodes, 3 do not have 8 GPUs (4 GPUs: a, b; 2 GPUs, not judged by podshaper: c)."),
            std::string::npos)
      << m;
  EXPECT_NE(m.find("No node has that many GPUs: ask for a count the nodes have (4, 2) in each pod's nvidia.com/gpu, splitting "
                   "the job into more pods, or add such nodes."),
            std::string::npos)
      << m;
  EXPECT_EQ(j.cause, PendingCause::kGpuCount);
  EXPECT_EQ(j.lookAgainAfter, 30);
}

TEST(Pending, NotValidatedNodesAreGroupedByTheirReason) {
  NodeFacts b = node("b", 8, "false"), c = node("c", 8, "false"), d = node("d", 8, "false");
  b.notValidatedReason = c.notValidatedReason = "P2PUnavailable";
  d.notValidatedReason = "ReportStale";
  auto j = judgePending(pendingPod(), {node("a", 4), b, c, d}, kLater, 30);
  ASSERT_TRUE(j.event);
  const std::string& m = j.event->message;
  EXPECT_NE(m.find("Of 4 nodes, 1 does not have 8 GPUs (4 GPUs: a); 3 are not validated (P2PUnavailable: b, c; "
                   "ReportStale: d)."),
            std::string::npos)
      << m;
  EXPECT_NE(m.find("kubectl describe gtr b (podshaper's report of that node's GPUs) says why it is not validated."), std::string::npos) << m;
  EXPECT_EQ(j.cause, PendingCause::kValidated);
}

TEST(Pending, ANodeOfTheSizeAskedThatPodshaperHasNotJudgedIsNotValidatedRatherThanTooSmall) {
  NodeFacts unjudged = node("p5", 8, "");
  auto j = judgePending(pendingPod(), {node("a", 4), unjudged}, kLater, 30);
  ASSERT_TRUE(j.event);
  EXPECT_NE(j.event->message.find("1 does not have 8 GPUs (4 GPUs: a); 1 is not validated (not judged by podshaper: "
                                  "p5). podshaper-agent has not reported p5 (is it running there?)."),
            std::string::npos)
      << j.event->message;
}

TEST(Pending, MemlockNotGrantedIsNamedWithWhatTheNodeGrants) {
  auto j = judgePending(pendingPod(), {node("a", 8, "true", "65536"), node("b", 8, "true", "not-granted")}, kLater,
                        30);
  ASSERT_TRUE(j.event);
  EXPECT_NE(j.event->message.find("2 do not grant that memlock (memlock 64Ki: a; memlock not-granted: b)"),
            std::string::npos)
      << j.event->message;
  EXPECT_EQ(j.cause, PendingCause::kMemlock);
}

TEST(Pending, ANodeTakenByANodeExclusivePodNamesThatPod) {
  NodeFacts x = node("node-x", 8);
  x.exclusivePods = {"ml/train-0"};
  auto j = judgePending(pendingPod(), {x, node("y", 4)}, kLater, 30);
  ASSERT_TRUE(j.event);
  const std::string& m = j.event->message;
  EXPECT_NE(m.find("1 does not have 8 GPUs (4 GPUs: y); 1 already runs a node-exclusive pod (node-x runs ml/train-0)."),
            std::string::npos)
      << m;
  EXPECT_NE(m.find("It starts when a node-exclusive pod named here ends."), std::string::npos) << m;
  EXPECT_EQ(j.cause, PendingCause::kNodeExclusive);  // what stops the closest node, not what most nodes fail
  // With a node not validated besides: both are said.
  NodeFacts z = node("z", 8, "false");
  z.notValidatedReason = "ReportStale";
  auto both = judgePending(pendingPod(), {x, z}, kLater, 30);
  ASSERT_TRUE(both.event);
  EXPECT_NE(both.event->message.find(" kubectl describe gtr z (podshaper's report of that node's GPUs) says why it is not validated. It starts when a "
                                     "node-exclusive pod named here ends."),
            std::string::npos)
      << both.event->message;
}

TEST(Pending, CordonsAndUntoleratedTaintsAreSaid) {
  NodeFacts a = node("a", 8), b = node("b", 8);
  a.node.unschedulable = true;
  b.node.taints = {{"podshaper.io/topology-not-validated", "P2PUnavailable", "NoSchedule"}};
  json pod = pendingPod();
  auto j = judgePending(pod, {a, b}, kLater, 30);
  ASSERT_TRUE(j.event);
  EXPECT_NE(j.event->message.find("1 is cordoned (a); 1 carries a taint the pod does not tolerate "
                                  "(podshaper.io/topology-not-validated=P2PUnavailable:NoSchedule: b)"),
            std::string::npos)
      << j.event->message;
  pod["spec"]["tolerations"] = {{{"key", "podshaper.io/topology-not-validated"}, {"operator", "Exists"}}};
  j = judgePending(pod, {b}, kLater, 30);
  EXPECT_EQ(j.cause, PendingCause::kScheduler);
}

TEST(Pending, ANotReadyNodeIsSaidInWordsNotAsItsTaint) {
  NodeFacts gone = node("real-h200x4-0", 8);
  gone.node.taints = {{"node.kubernetes.io/unreachable", "", "NoSchedule"}};
  auto j = judgePending(pendingPod(), {gone}, kLater, 30);
  ASSERT_TRUE(j.event);
  EXPECT_NE(j.event->message.find("1 carries a taint the pod does not tolerate (real-h200x4-0 is NotReady: its "
                                  "kubelet stopped reporting (taint node.kubernetes.io/unreachable:NoSchedule))"),
            std::string::npos)
      << j.event->message;
  EXPECT_STREQ(toString(j.cause), "taint");  // the metrics' label stays
  // Two nodes whose kubelets say they are not ready, grouped.
  NodeFacts a = node("a", 8), b = node("b", 8);
  a.node.taints = b.node.taints = {{"node.kubernetes.io/not-ready", "", "NoExecute"}};
  j = judgePending(pendingPod(), {a, b}, kLater, 30);
  ASSERT_TRUE(j.event);
  EXPECT_NE(j.event->message.find("2 carry a taint the pod does not tolerate (a, b are NotReady: their kubelets "
                                  "report them not ready (taint node.kubernetes.io/not-ready:NoExecute))"),
            std::string::npos)
      << j.event->message;
  EXPECT_EQ(j.cause, PendingCause::kTaint);
  // A taint of that key's prefix, but not it, is said as it is.
  NodeFacts other = node("c", 8);
  other.node.taints = {{"node.kubernetes.io/unreachable-ish", "x", "NoSchedule"}};
  j = judgePending(pendingPod(), {other}, kLater, 30);
  ASSERT_TRUE(j.event);
  EXPECT_NE(j.event->message.find("(node.kubernetes.io/unreachable-ish=x:NoSchedule: c)"), std::string::npos)
      << j.event->message;
}

TEST(Pending, WhenPodshaperIsSatisfiedTheSchedulerSpeaks) {
  auto j = judgePending(pendingPod(), {node("a", 8)}, kLater, 30);
  ASSERT_TRUE(j.event);
  EXPECT_NE(j.event->message.find("podshaper's requirements are met, yet no node took it."), std::string::npos);
  EXPECT_NE(j.event->message.find("1 node meets all of it (a); the scheduler says: 0/3 nodes are available: 3 "
                                  "Insufficient nvidia.com/gpu."),
            std::string::npos)
      << j.event->message;
  EXPECT_EQ(j.cause, PendingCause::kScheduler);
}

TEST(Pending, TheUsersOwnSelectorIsARequirementToo) {
  json pod = pendingPod();
  pod["spec"]["nodeSelector"] = {{"kubernetes.io/hostname", "b"}};
  NodeFacts a = node("a", 8);
  a.node.labels = {{"podshaper.io/topology-validated", "true"},
              {"podshaper.io/gpu-count", "8"},
              {"podshaper.io/memlock", "unlimited"},
              {"kubernetes.io/hostname", "a"}};
  auto j = judgePending(pod, {a}, kLater, 30);
  ASSERT_TRUE(j.event);
  EXPECT_NE(j.event->message.find("matches kubernetes.io/hostname=b"), std::string::npos) << j.event->message;
  EXPECT_NE(j.event->message.find("1 does not match kubernetes.io/hostname=b (kubernetes.io/hostname=a: a)"),
            std::string::npos)
      << j.event->message;
  EXPECT_EQ(j.cause, PendingCause::kSelector);
}

TEST(Pending, TheAnswerDoesNotChangeWithTheWait) {
  auto early = judgePending(pendingPod(), {node("a", 4)}, kLater, 30);
  auto late = judgePending(pendingPod(), {node("a", 4)}, kLater + 600, 30);
  ASSERT_TRUE(early.event && late.event);
  EXPECT_NE(early.event->message, late.event->message);
  EXPECT_EQ(early.answer, late.answer);
  EXPECT_EQ(late.event->message, "Pending for 10m: " + late.answer);
}

TEST(Pending, EachCauseIsTheMetricsLabelItWas) {
  std::vector<std::string> labels;
  for (PendingCause cause : kPendingCauses) labels.push_back(toString(cause));
  EXPECT_EQ(labels, (std::vector<std::string>{"gpu-count", "validated", "memlock", "p2p", "selector", "cordoned", "taint",
                                              "node-exclusive", "scheduler"}));
}

TEST(Pending, ManyNodesAreCountedWithAFewExamples) {
  std::vector<NodeFacts> nodes;
  for (int i = 0; i < 12; ++i) nodes.push_back(node("n" + std::to_string(10 + i), 4));
  auto j = judgePending(pendingPod(), nodes, kLater, 30);
  ASSERT_TRUE(j.event);
  EXPECT_NE(j.event->message.find("12 do not have 8 GPUs (4 GPUs: n10, n11, n12 and 9 more)"), std::string::npos)
      << j.event->message;
}

TEST(PendingNodeFacts, ExclusivePodsTaintsCordonsAndReasons) {
  json n1 = {{"metadata", {{"name", "n1"}, {"labels", {{"podshaper.io/topology-validated", "false"}}}}},
             {"spec", {{"unschedulable", true}, {"taints", {{{"key", "k"}, {"value", "v"}, {"effect", "NoSchedule"}}}}}},
             {"status", {{"allocatable", {{"nvidia.com/gpu", "8"}}}}}};
  json n2 = {{"metadata", {{"name", "n2"}, {"labels", {{"podshaper.io/topology-validated", "true"}}}}}};
  auto pod = [](const std::string& name, const std::string& nodeName, const std::string& phase,
                const std::string& placement) {
    return json{{"metadata", {{"name", name}, {"namespace", "ml"}, {"labels", {{"podshaper.io/placement", placement}}}}},
                {"spec", {{"nodeName", nodeName}}},
                {"status", {{"phase", phase}}}};
  };
  const json failing = {{"status", {{"conditions", {{{"type", "Validated"}, {"status", "False"},
                                                      {"reason", "P2PUnavailable"}}}}}}};
  const json validated = {{"status", {{"conditions", {{{"type", "Validated"}, {"status", "True"},
                                                        {"reason", "AllChecksPassed"}}}}}}};
  StringPool pool;
  std::vector<NodeFacts> facts = {nodeFactsOf(n1, &failing, pool), nodeFactsOf(n2, &validated, pool)};
  addExclusivePods(facts, {pod("b", "n2", "Running", "node-exclusive"), pod("a", "n2", "Pending", "node-exclusive"),
                           pod("done", "n2", "Succeeded", "node-exclusive"), pod("s", "n2", "Running", "shared")});
  ASSERT_EQ(facts.size(), 2u);
  EXPECT_EQ(facts[0].node.name, "n1");
  EXPECT_TRUE(facts[0].node.unschedulable);
  ASSERT_EQ(facts[0].node.taints.size(), 1u);
  EXPECT_EQ(facts[0].node.taints[0].effect, "NoSchedule");
  EXPECT_EQ(facts[0].notValidatedReason, "P2PUnavailable");
  EXPECT_EQ(facts[0].node.gpus(), 8u);
  EXPECT_EQ(facts[0].validated, "False");
  EXPECT_EQ(facts[1].notValidatedReason, "");  // labelled validated: no reason asked
  EXPECT_EQ(facts[1].validated, "True");
  EXPECT_EQ(facts[1].validatedReason, "AllChecksPassed");
  EXPECT_TRUE(facts[0].exclusivePods.empty());
  EXPECT_EQ(nodeFactsOf(n1, nullptr, pool).notValidatedReason, "no GPUTopologyReport");
  EXPECT_EQ(nodeFactsOf(json{{"metadata", {{"name", "n3"}}}}, &failing, pool).notValidatedReason, "");  // not judged
  EXPECT_EQ(facts[1].exclusivePods, (std::vector<std::string>{"ml/a", "ml/b"}));
  // The label's key is kept once for both nodes; its values differ.
  ASSERT_NE(facts[0].node.labels.find("podshaper.io/topology-validated"), nullptr);
  EXPECT_EQ(*facts[0].node.labels.find("podshaper.io/topology-validated"), "false");
  EXPECT_EQ(facts[1].node.labels.find("absent"), nullptr);
}

}  // namespace
}  // namespace podshaper
