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
                                              "node-exclusive", "nvlink-domain", "scheduler"}));
}

TEST(Pending, ManyNodesAreCountedWithAFewExamples) {
  std::vector<NodeFacts> nodes;
  for (int i = 0; i < 12; ++i) nodes.push_back(node("n" + std::to_string(10 + i), 4));
  auto j = judgePending(pendingPod(), nodes, kLater, 30);
  ASSERT_TRUE(j.event);
  EXPECT_NE(j.event->message.find("12 do not have 8 GPUs (4 GPUs: n10, n11, n12 and 9 more)"), std::string::npos)
      << j.event->message;
}

// Multi-node NVLink (docs/webhook.md): a pod of 4 GPUs whose required podAffinity keeps Job
// llama in one NVLink domain, as the webhook writes it (api/node_labels.h nvlinkGroupTerm).
constexpr const char* kDomainA = "c0ffee00-0000-4000-8000-000000000001.1";
constexpr const char* kDomainB = "c0ffee00-0000-4000-8000-000000000001.2";

json nvlinkPod(const std::string& group = "job.llama") {
  json pod = pendingPod(4);
  pod["metadata"]["labels"]["podshaper.io/nvlink-group"] = group;
  pod["spec"]["affinity"]["podAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"] = {nvlinkGroupTerm(group)};
  return pod;
}

// A 4-GPU tray of `domain` ("": none), running the node-exclusive pod `runs` ("": none) of
// `group` ("": none; "namespace/group").
NodeFacts tray(const std::string& name, const std::string& domain, const std::string& runs = "",
               const std::string& group = "") {
  NodeFacts f = node(name, 4);
  if (!domain.empty()) f.node.labels.set("podshaper.io/nvlink-domain", domain);
  if (!runs.empty()) f.exclusivePods = {runs};
  if (!group.empty()) f.nvlinkGroups = {group};
  return f;
}

// Domain A's 9 trays: 8 run Job llama's pods, 1 another job's; domain B's 9 are free.
std::vector<NodeFacts> rackWithTheJobInA() {
  std::vector<NodeFacts> nodes;
  for (int i = 0; i < 8; ++i) {
    nodes.push_back(tray("a" + std::to_string(i), kDomainA, "ml/llama-" + std::to_string(i), "ml/job.llama"));
  }
  nodes.push_back(tray("a8", kDomainA, "train/other-0", "train/job.other"));
  for (int i = 0; i < 9; ++i) nodes.push_back(tray("b" + std::to_string(i), kDomainB));
  return nodes;
}

TEST(PendingNvlink, APodKeptOutOfTheOtherDomainNamesTheJobsDomainAndTheFreeOnes) {
  auto j = judgePending(nvlinkPod(), rackWithTheJobInA(), kLater, 30);
  ASSERT_TRUE(j.event);
  const std::string& m = j.event->message;
  const std::string a = kDomainA, b = kDomainB;
  EXPECT_NE(m.find(", runs no other node-exclusive pod and is in NVLink domain " + a + " with its job's other pods "
                   "(podshaper.io/nvlink-group=job.llama)."),
            std::string::npos)
      << m;
  EXPECT_NE(m.find("Of 18 nodes, 9 already run a node-exclusive pod (a0 runs ml/llama-0; a1 runs ml/llama-1; a2 runs "
                   "ml/llama-2; …); 9 are not in the job's NVLink domain (NVLink domain " + b + ": b0, b1, b2 and 6 more)."),
            std::string::npos)
      << m;
  EXPECT_NE(m.find(" In the job's NVLink domain, all 9 nodes are taken (8 by this job, 1 by train/other-0); NVLink "
                   "domain " + b + " has 9 free nodes: gang scheduling (Kueue's topology-aware scheduling, the Workload "
                   "API) starts a job where all its pods fit; without it, this pod starts when a node in the job's "
                   "NVLink domain frees, or create the job again for its first pod to pick a domain anew."),
            std::string::npos)
      << m;
  // Where the job runs says it: not the node-exclusive pods' end.
  EXPECT_EQ(m.find("It starts when a node-exclusive pod named here ends."), std::string::npos) << m;
  EXPECT_EQ(j.cause, PendingCause::kNvlinkDomain);
  EXPECT_STREQ(toString(j.cause), "nvlink-domain");
}

TEST(PendingNvlink, BeforeAnyPodOfTheJobIsBoundAnyDomainWillDo) {
  std::vector<NodeFacts> nodes = {tray("a0", kDomainA, "ml/other", "ml/job.other"), tray("b0", kDomainB)};
  auto j = judgePending(nvlinkPod(), nodes, kLater, 30);
  ASSERT_TRUE(j.event);
  EXPECT_EQ(j.event->message.find("NVLink"), std::string::npos) << j.event->message;
  EXPECT_NE(j.event->message.find("1 node meets all of it (b0)"), std::string::npos) << j.event->message;
  EXPECT_EQ(j.cause, PendingCause::kScheduler);
  // The group's name in another namespace is another job.
  nodes[0].nvlinkGroups = {"train/job.llama"};
  EXPECT_EQ(judgePending(nvlinkPod(), nodes, kLater, 30).cause, PendingCause::kScheduler);
  // A node in no domain fails the podAffinity even then, as the scheduler's topology key is missing.
  nodes.push_back(tray("c0", ""));
  nodes[1].node.unschedulable = true;
  j = judgePending(nvlinkPod(), nodes, kLater, 30);
  ASSERT_TRUE(j.event);
  EXPECT_NE(j.event->message.find("1 is in no NVLink domain, which the pod's podAffinity needs (no "
                                  "podshaper.io/nvlink-domain: c0)."),
            std::string::npos)
      << j.event->message;
  EXPECT_EQ(j.event->message.find("is in NVLink domain"), std::string::npos) << j.event->message;  // not asked
  EXPECT_EQ(j.cause, PendingCause::kNvlinkDomain);
}

TEST(PendingNvlink, AFreeNodeInTheJobsDomainLeavesItToTheScheduler) {
  std::vector<NodeFacts> nodes = rackWithTheJobInA();
  nodes[8] = tray("a8", kDomainA);
  auto j = judgePending(nvlinkPod(), nodes, kLater, 30);
  ASSERT_TRUE(j.event);
  EXPECT_NE(j.event->message.find("1 node meets all of it (a8)"), std::string::npos) << j.event->message;
  EXPECT_EQ(j.event->message.find("The job's pods"), std::string::npos) << j.event->message;
  EXPECT_EQ(j.cause, PendingCause::kScheduler);
}

TEST(PendingNvlink, TakenAndFailingNodesOfTheJobsDomainAndNoRoomElsewhere) {
  NodeFacts bad = tray("a2", kDomainA);
  bad.node.labels.set("podshaper.io/topology-validated", "false");
  bad.notValidatedReason = "FabricUnhealthy";
  std::vector<NodeFacts> nodes = {tray("a0", kDomainA, "ml/llama-0", "ml/job.llama"),
                                  tray("a1", kDomainA, "ml/x-0", "ml/job.x"), bad,
                                  tray("b0", kDomainB, "ml/y-0"), tray("c0", "")};
  auto j = judgePending(nvlinkPod(), nodes, kLater, 30);
  ASSERT_TRUE(j.event);
  const std::string& m = j.event->message;
  EXPECT_NE(m.find("In the job's NVLink domain, 2 of 3 nodes are taken (1 by this job, 1 by ml/x-0) and 1 fails a "
                   "requirement above; no other NVLink domain has a free node. It starts when a node in the job's "
                   "NVLink domain frees."),
            std::string::npos)
      << m;
  EXPECT_NE(m.find("1 is not in the job's NVLink domain (no podshaper.io/nvlink-domain: c0)"),
            std::string::npos)
      << m;
  EXPECT_NE(m.find("kubectl describe gtr a2"), std::string::npos) << m;
  EXPECT_EQ(j.cause, PendingCause::kNvlinkDomain);
}

TEST(PendingNvlink, ManyDomainsAreCountedWithAFewAndTheAnswerStaysShort) {
  // The job's pods in two domains (placed before the term, or by hand), 12 other domains free.
  std::vector<NodeFacts> nodes = {tray("a0", kDomainA, "ml/llama-0", "ml/job.llama"),
                                  tray("b0", kDomainB, "ml/llama-1", "ml/job.llama")};
  for (int d = 0; d < 12; ++d) {
    for (int i = 0; i <= d; ++i) {
      nodes.push_back(tray("d" + std::to_string(d) + "-" + std::to_string(i), "domain-" + std::to_string(100 + d)));
    }
  }
  auto j = judgePending(nvlinkPod(), nodes, kLater, 30);
  ASSERT_TRUE(j.event);
  const std::string& m = j.event->message;
  EXPECT_NE(m.find("In the job's NVLink domains, all 2 nodes are taken (2 by this job); NVLink domains domain-111 (12 "
                   "free nodes), domain-110 (11 free nodes), domain-109 (10 free nodes) and 9 more have room: gang "
                   "scheduling"),
            std::string::npos)
      << m;
  EXPECT_LT(m.size(), 2000u) << m;
}

TEST(PendingNvlink, OnlyTheWebhooksTermIsRead) {
  // A term that selects more than the group, or in other namespaces, or on another key, is
  // not the job's domain: the other domain's node meets all podshaper asks.
  std::vector<NodeFacts> nodes = {tray("a0", kDomainA, "ml/llama-0", "ml/job.llama"), tray("b0", kDomainB)};
  json wider = nvlinkPod();
  auto& term = wider["spec"]["affinity"]["podAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"][0];
  term["labelSelector"]["matchLabels"] = {{"app", "llama"}};
  json namespaces = nvlinkPod();
  namespaces["spec"]["affinity"]["podAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"][0]["namespaceSelector"] =
      json::object();
  json zone = nvlinkPod();
  zone["spec"]["affinity"]["podAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"][0]["topologyKey"] =
      "topology.kubernetes.io/zone";
  json preferred = nvlinkPod();
  preferred["spec"]["affinity"]["podAffinity"] = {
      {"preferredDuringSchedulingIgnoredDuringExecution", {{{"weight", 100}, {"podAffinityTerm", nvlinkGroupTerm("job.llama")}}}}};
  json twoValues = nvlinkPod();
  twoValues["spec"]["affinity"]["podAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"][0]["labelSelector"]
           ["matchExpressions"][0]["values"] = {"job.llama", "job.other"};
  for (const json& pod : {wider, namespaces, zone, preferred, twoValues}) {
    auto j = judgePending(pod, nodes, kLater, 30);
    ASSERT_TRUE(j.event);
    EXPECT_EQ(j.cause, PendingCause::kScheduler) << j.event->message;
    EXPECT_EQ(j.event->message.find("NVLink"), std::string::npos) << j.event->message;
  }
  // matchLabels says the same as the webhook's expression.
  json labels = nvlinkPod();
  labels["spec"]["affinity"]["podAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"][0]["labelSelector"] = {
      {"matchLabels", {{"podshaper.io/nvlink-group", "job.llama"}}}};
  EXPECT_EQ(judgePending(labels, nodes, kLater, 30).cause, PendingCause::kNvlinkDomain);
  EXPECT_EQ(requiredNvlinkGroup(nvlinkPod()["spec"]), "job.llama");
  EXPECT_EQ(requiredNvlinkGroup(json::object()), std::nullopt);
  EXPECT_EQ(requiredNvlinkGroup(json{{"affinity", {{"podAffinity", {{"requiredDuringSchedulingIgnoredDuringExecution", "x"}}}}}}),
            std::nullopt);  // malformed: no term
}

TEST(PendingNodeFacts, ExclusivePodsTaintsCordonsAndReasons) {
  json n1 = {{"metadata", {{"name", "n1"}, {"labels", {{"podshaper.io/topology-validated", "false"}}}}},
             {"spec", {{"unschedulable", true}, {"taints", {{{"key", "k"}, {"value", "v"}, {"effect", "NoSchedule"}}}}}},
             {"status", {{"allocatable", {{"nvidia.com/gpu", "8"}}}}}};
  json n2 = {{"metadata", {{"name", "n2"}, {"labels", {{"podshaper.io/topology-validated", "true"}}}}}};
  auto pod = [](const std::string& name, const std::string& nodeName, const std::string& phase,
                const std::string& placement, const std::string& group = "") {
    json labels = {{"podshaper.io/placement", placement}};
    if (!group.empty()) labels["podshaper.io/nvlink-group"] = group;
    return json{{"metadata", {{"name", name}, {"namespace", "ml"}, {"labels", labels}}},
                {"spec", {{"nodeName", nodeName}}},
                {"status", {{"phase", phase}}}};
  };
  const json failing = {{"status", {{"conditions", {{{"type", "Validated"}, {"status", "False"},
                                                      {"reason", "P2PUnavailable"}}}}}}};
  const json validated = {{"status", {{"conditions", {{{"type", "Validated"}, {"status", "True"},
                                                        {"reason", "AllChecksPassed"}}}}}}};
  StringPool pool;
  std::vector<NodeFacts> facts = {nodeFactsOf(n1, &failing, pool), nodeFactsOf(n2, &validated, pool)};
  addBoundPods(facts, {pod("b", "n2", "Running", "node-exclusive", "job.t"), pod("a", "n2", "Pending", "node-exclusive"),
                       pod("done", "n2", "Succeeded", "node-exclusive", "job.done"),
                       pod("s", "n2", "Running", "shared", "job.s"), pod("t", "n2", "Running", "shared", "job.t"),
                       pod("w", "", "Pending", "node-exclusive", "job.w")});
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
  EXPECT_TRUE(facts[0].nvlinkGroups.empty());
  EXPECT_EQ(nodeFactsOf(n1, nullptr, pool).notValidatedReason, "no GPUTopologyReport");
  EXPECT_EQ(nodeFactsOf(json{{"metadata", {{"name", "n3"}}}}, &failing, pool).notValidatedReason, "");  // not judged
  EXPECT_EQ(facts[1].exclusivePods, (std::vector<std::string>{"ml/a", "ml/b"}));
  // Every bound pod's group, node-exclusive or not, once; not a finished pod's, not an unbound one's.
  EXPECT_EQ(facts[1].nvlinkGroups, (std::vector<std::string>{"ml/job.s", "ml/job.t"}));
  // The label's key is kept once for both nodes; its values differ.
  ASSERT_NE(facts[0].node.labels.find("podshaper.io/topology-validated"), nullptr);
  EXPECT_EQ(*facts[0].node.labels.find("podshaper.io/topology-validated"), "false");
  EXPECT_EQ(facts[1].node.labels.find("absent"), nullptr);
}

}  // namespace
}  // namespace podshaper
