// A node that stopped applying the memlock shaped pods ask: the containers podshaper-shm
// holds back there, and the verdict they make (MemlockNotApplied).
#include "judging/memlock_held.h"

#include <gtest/gtest.h>

#include "judging/report_status.h"
#include "judging/verdict.h"
#include "tests/unit/judging/verdict_builder.h"

namespace podshaper {
namespace {

// As the kubelet shows a container podshaper-shm refused to create (shm/, the NRI plugin).
const std::string kShmSays =
    "failed to create containerd container: create container: MemlockNotApplied: node gpu-0 did not apply "
    "RLIMIT_MEMLOCK 4Mi that ulimits.noderesource.dev/container.train asks (it would get 8Mi, the runtime's "
    "default; the NRI ulimit-adjuster plugin is not running). podshaper-shm holds the container back until the "
    "node applies it; it tries again every 10 s.";

json waiting(const std::string& container, const std::string& message,
             const std::string& reason = "CreateContainerError") {
  json cs = {{"name", container}, {"restartCount", 0}};
  cs["state"]["waiting"] = {{"reason", reason}, {"message", message}};
  return cs;
}

json shapedPod(const std::string& name, const std::string& node, json containerStatuses, bool shaped = true) {
  json labels = json::object();
  if (shaped) labels["podshaper.io/shaped"] = "true";
  json pod = {{"metadata", {{"name", name}, {"namespace", "ml"}, {"labels", labels}}},
              {"spec", {{"nodeName", node}}},
              {"status", {{"phase", "Pending"}, {"containerStatuses", std::move(containerStatuses)}}}};
  return pod;
}

json heldPod(const std::string& name, const std::string& node = "gpu-0") {
  return shapedPod(name, node, json::array({waiting("train", kShmSays)}));
}

// A node whose agent's probe got the 4Mi it asked: validated, labelled 4194304.
json probedSpec(uint64_t got = 4 << 20) {
  return TopologyBuilder(2).memlock(got).memlockProbe(MemlockLimit{4 << 20}, true).spec();
}

Policy laxPolicy() {  // as with the webhook's memlock: 4Mi (docs/operator.md "TopologyPolicy")
  Policy p = defaultPolicy();
  p.requirements.requireMemlockUnlimited = false;
  return p;
}

void expectCondition(const Verdict& v, const std::string& type, const std::string& status, const std::string& reason,
                     const std::string& message) {
  const Condition* c = v.condition(type);
  ASSERT_NE(c, nullptr) << type;
  EXPECT_EQ(c->status, status) << type;
  EXPECT_EQ(c->reason, reason) << type;
  EXPECT_EQ(c->message, message) << type;
}

TEST(MemlockHeld, OnlyShapedPodsOnTheNodeWithTheMarkerInAWaitingMessage) {
  json initHeld = shapedPod("b", "gpu-0", json::array({waiting("train", kShmSays)}));
  initHeld["status"]["initContainerStatuses"] = json::array({waiting("init", "x MemlockNotApplied: the init's")});
  const std::vector<json> pods = {
      heldPod("c"),
      initHeld,
      heldPod("elsewhere", "gpu-1"),                                                   // another node
      shapedPod("unshaped", "gpu-0", json::array({waiting("train", kShmSays)}), false),  // not the webhook's
      shapedPod("pulling", "gpu-0", json::array({waiting("train", "Back-off pulling image", "ImagePullBackOff")})),
      // The word without the marker's ": ".
      shapedPod("other-error", "gpu-0",
                json::array({waiting("train", "failed to create containerd container: MemlockNotApplied")})),
      shapedPod("unbound", "", json::array({waiting("train", kShmSays)})),
  };
  const std::vector<MemlockHeld> held = memlockHeldOn("gpu-0", pods);
  ASSERT_EQ(held.size(), 3u);
  EXPECT_EQ(held[0], (MemlockHeld{"ml/b", "init", "the init's"}));  // init containers first, pods by name
  EXPECT_EQ(held[1].pod + " " + held[1].container, "ml/b train");
  EXPECT_EQ(held[2].pod, "ml/c");
  EXPECT_EQ(held[2].words.rfind("node gpu-0 did not apply RLIMIT_MEMLOCK 4Mi", 0), 0u) << held[2].words;
  EXPECT_TRUE(memlockHeldOn("gpu-1", {pods[1]}).empty());
  EXPECT_TRUE(memlockHeldOn("", pods).empty());
  EXPECT_EQ(memlockHeld(pods[2]).size(), 1u);  // bound elsewhere, but held there
  EXPECT_TRUE(memlockHeld(pods[3]).empty());
  EXPECT_TRUE(memlockHeld(json()).empty());
  EXPECT_TRUE(memlockHeld(json::array()).empty());
}

TEST(Verdict, HeldPodsTakeTheNodeOffValidatedWithTheReasonAndBackOn) {
  Node node = gpuNode(2);
  const json spec = probedSpec();
  const Verdict good = judge(spec, &node, {laxPolicy()}, kNow);
  ASSERT_TRUE(good.validated) << good.condition("Validated")->message;
  ASSERT_EQ(good.memlock, "4194304");

  json b = shapedPod("b", "gpu-0", json::array({waiting("sidecar", kShmSays), waiting("train", kShmSays)}));
  const std::vector<json> pods = {heldPod("a"), b, heldPod("c"), heldPod("d"), heldPod("other", "gpu-1")};
  const Verdict v = judge(spec, &node, {laxPolicy()}, kNow, memlockHeldOn("gpu-0", pods));
  EXPECT_FALSE(v.validated);
  EXPECT_EQ(v.memlock, "not-applied");
  auto labels = nodeLabels(v);
  EXPECT_EQ(labels["podshaper.io/memlock"], "not-applied");
  EXPECT_EQ(labels["podshaper.io/topology-validated"], "false");
  const std::string memlockSays =
      "The container runtime on this node does not apply the memlock podshaper asks for: containers of shaped "
      "pods asking for RLIMIT_MEMLOCK=4 MiB (their ulimits.noderesource.dev/container.<container> annotation) "
      "would start with the runtime's default instead. podshaper-shm holds back the containers of shaped pods "
      "until the node applies it; 4 pods wait here: ml/a (container train), ml/b (containers sidecar and "
      "train), ml/c (container train) and 1 more. podshaper-shm says of ml/a: \"node gpu-0 did not apply "
      "RLIMIT_MEMLOCK 4Mi that ulimits.noderesource.dev/container.train asks (it would get 8Mi, the runtime's "
      "default; the NRI ulimit-adjuster plugin is not running)\". Pods shaped by podshaper are kept off this "
      "node meanwhile (label podshaper.io/memlock=not-applied). To fix it, get the NRI ulimit-adjuster plugin "
      "of the node's container runtime running again (crashed or restarting: its log and containerd's on the "
      "node say why); the held containers then start by themselves. The node is validated again once no "
      "container is held here and the agent's memlock-probe got what it asked.";
  expectCondition(v, "MemlockUnlimited", "False", "MemlockNotApplied", memlockSays);
  const std::string validatedSays =
      "The node does not meet TopologyPolicy default: the container runtime does not apply the memlock shaped "
      "pods ask (RLIMIT_MEMLOCK=4 MiB), so podshaper-shm holds back 4 shaped pods here. Node-exclusive "
      "training pods are not placed here until this is fixed.";
  expectCondition(v, "Validated", "False", "MemlockNotApplied", validatedSays);

  // Told as any verdict change: Warnings when it goes, and the Node's condition says why.
  const json goodStatus = reportStatus(good, nullptr, 1, kNow);
  EXPECT_EQ(eventKinds(transitionEvents(goodStatus, v)),
            (std::vector<std::string>{"Warning TopologyNotValidated", "Warning MemlockNotApplied"}));
  const json condition = nodeConditionPatch(nodeObject(2), &v, kNow);
  ASSERT_FALSE(condition.is_null());
  EXPECT_EQ(condition["status"]["conditions"][0]["type"], "GPUTopologyValidated");
  EXPECT_EQ(condition["status"]["conditions"][0]["status"], "False");
  EXPECT_EQ(condition["status"]["conditions"][0]["reason"], "MemlockNotApplied");
  EXPECT_EQ(condition["status"]["conditions"][0]["message"], v.condition("Validated")->message);

  // Even a policy that asks nothing: shaped pods do not start here now.
  EXPECT_FALSE(judge(spec, &node, {Policy{.name = "lax"}}, kNow, memlockHeldOn("gpu-0", pods)).validated);
  // Held elsewhere only, or by pods that are not shaped: judged as before.
  EXPECT_TRUE(judge(spec, &node, {laxPolicy()}, kNow, memlockHeldOn("gpu-0", {pods[4]})).validated);
  // No pod held any more: validated again, as before.
  const Verdict back = judge(spec, &node, {laxPolicy()}, kNow, {});
  EXPECT_TRUE(back.validated);
  EXPECT_EQ(nodeLabels(back)["podshaper.io/memlock"], "4194304");
  EXPECT_EQ(eventKinds(transitionEvents(reportStatus(v, goodStatus, 1, kNow), back)),
            (std::vector<std::string>{"Normal TopologyValidated", "Warning MemlockLimited"}));
}

TEST(Verdict, OnePodHeldIsNamedAlone) {
  Node node = gpuNode(2);
  const Verdict v = judge(probedSpec(), &node, {laxPolicy()}, kNow, memlockHeldOn("gpu-0", {heldPod("a")}));
  EXPECT_NE(v.condition("MemlockUnlimited")->message.find("; 1 pod waits here: ml/a (container train). "),
            std::string::npos)
      << v.condition("MemlockUnlimited")->message;
  EXPECT_NE(v.condition("Validated")->message.find("so podshaper-shm holds back 1 shaped pod here."), std::string::npos)
      << v.condition("Validated")->message;
}

TEST(Verdict, AProbeThatGotAnotherLimitThanItAskedIsNotApplied) {
  Node node = gpuNode(2);
  // Asked 4Mi, started with the runtime's default 8Mi: the annotation was not applied.
  const Verdict v = judge(probedSpec(8 << 20), &node, {laxPolicy()}, kNow);
  EXPECT_FALSE(v.validated);
  EXPECT_EQ(v.memlock, "not-applied");
  EXPECT_EQ(v.condition("Validated")->reason, "MemlockNotApplied");
  EXPECT_EQ(v.condition("MemlockUnlimited")->message,
            "The container runtime on this node does not apply the memlock podshaper asks for: the agent's "
            "memlock-probe container asked for RLIMIT_MEMLOCK=4 MiB (its "
            "ulimits.noderesource.dev/container.memlock-probe annotation, as shaped pods ask) and started with 8 MiB. "
            "podshaper-shm holds back the containers of shaped pods until the node applies it. Pods shaped by "
            "podshaper are kept off this node meanwhile (label podshaper.io/memlock=not-applied). To fix it, get the "
            "NRI ulimit-adjuster plugin of the node's container runtime running again (crashed or restarting: its "
            "log and containerd's on the node say why); then delete the podshaper-agent pod on this node, so that "
            "its memlock-probe asks again as it starts. The node is validated again once no container is held here "
            "and the agent's memlock-probe got what it asked.");
  EXPECT_NE(v.condition("Validated")->message.find("the container runtime does not apply the memlock shaped pods ask "
                                                   "(RLIMIT_MEMLOCK=4 MiB): the agent's memlock-probe got 8 MiB."),
            std::string::npos)
      << v.condition("Validated")->message;
  // With held pods besides, both are said.
  const Verdict both = judge(probedSpec(8 << 20), &node, {laxPolicy()}, kNow, memlockHeldOn("gpu-0", {heldPod("a")}));
  EXPECT_NE(both.condition("Validated")->message.find(
                "(RLIMIT_MEMLOCK=4 MiB), so podshaper-shm holds back 1 shaped pod here and the agent's memlock-probe "
                "got 8 MiB."),
            std::string::npos)
      << both.condition("Validated")->message;
  // Unlimited asked, a finite limit got (or the other way round): not applied either.
  const json unlimitedAsked =
      TopologyBuilder(2).memlock(8 << 20).memlockProbe(MemlockLimit{}, true).spec();
  const Verdict limited = judge(unlimitedAsked, &node, {laxPolicy()}, kNow);
  EXPECT_EQ(limited.memlock, "not-applied");
  EXPECT_NE(limited.condition("MemlockUnlimited")->message.find("asked for RLIMIT_MEMLOCK=unlimited (its"),
            std::string::npos);
  const json moreThanAsked = TopologyBuilder(2).memlockProbe(MemlockLimit{4 << 20}, true).spec();
  const Verdict more = judge(moreThanAsked, &node, {laxPolicy()}, kNow);
  EXPECT_EQ(more.memlock, "not-applied");
  EXPECT_NE(more.condition("MemlockUnlimited")->message.find("and started with unlimited."), std::string::npos)
      << more.condition("MemlockUnlimited")->message;
  // What it asked: validated, the limit its label.
  EXPECT_TRUE(judge(probedSpec(), &node, {laxPolicy()}, kNow).validated);
}

TEST(Verdict, AProbeThatCouldNotStartKeepsMemlockNotGranted) {
  Node node = gpuNode(2);
  const json spec = TopologyBuilder(2).memlock(8 << 20).memlockProbe(MemlockLimit{4 << 20}, false, "refused").spec();
  const Verdict v = judge(spec, &node, {laxPolicy()}, kNow, memlockHeldOn("gpu-0", {heldPod("a")}));
  EXPECT_FALSE(v.validated);
  EXPECT_EQ(v.memlock, "not-granted");
  EXPECT_EQ(v.condition("MemlockUnlimited")->reason, "MemlockNotGranted");
  EXPECT_EQ(v.condition("Validated")->reason, "MemlockNotGranted");
  EXPECT_EQ(v.condition("Validated")->message.find("podshaper-shm"), std::string::npos);
}

TEST(Verdict, HeldPodsWithoutAProbeSayTheAnnotation) {
  Node node = gpuNode(2);
  const Verdict v = judge(TopologyBuilder(2).spec(), &node, {defaultPolicy()}, kNow,
                          memlockHeldOn("gpu-0", {heldPod("a")}));
  EXPECT_EQ(v.memlock, "not-applied");
  EXPECT_EQ(v.condition("MemlockUnlimited")->message.rfind(
                "The container runtime on this node does not apply the memlock podshaper asks for: containers of "
                "shaped pods asking for the RLIMIT_MEMLOCK of their ulimits.noderesource.dev/container.<container> "
                "annotation would start with the runtime's default instead. ",
                0),
            0u)
      << v.condition("MemlockUnlimited")->message;
  EXPECT_NE(v.condition("Validated")->message.find(
                "the container runtime does not apply the memlock shaped pods ask, so podshaper-shm holds back 1 "
                "shaped pod here"),
            std::string::npos)
      << v.condition("Validated")->message;
  // A report that cannot be read stays so.
  EXPECT_EQ(judge(json::array(), &node, {defaultPolicy()}, kNow, memlockHeldOn("gpu-0", {heldPod("a")})).memlock,
            "unknown");
}

TEST(Verdict, PodshaperShmsWordsAreQuotedToTheirFirstSentenceAndCut) {
  Node node = gpuNode(2);
  json pod = shapedPod("a", "gpu-0",
                       json::array({waiting("train", "MemlockNotApplied: " + std::string(400, 'x') + ". More.")}));
  const Verdict v = judge(probedSpec(), &node, {laxPolicy()}, kNow, memlockHeldOn("gpu-0", {pod}));
  const std::string& m = v.condition("MemlockUnlimited")->message;
  EXPECT_NE(m.find("says of ml/a: \"" + std::string(297, 'x') + "...\". Pods shaped"), std::string::npos) << m;
  EXPECT_EQ(m.find("More"), std::string::npos);
}

}  // namespace
}  // namespace podshaper

namespace podshaper {
namespace {

// The agent's memlock-probe held back by podshaper-shm (the runtime would start it without
// its memlock): not applied, not "not granted"; it starts by itself once the node applies it.
TEST(Verdict, AProbeHeldBackIsNotAppliedAndStartsByItself) {
  Node node = gpuNode(2);
  const json spec =
      TopologyBuilder(2)
          .memlock(8 << 20)
          .memlockProbe(MemlockLimit{4 << 20}, false,
                        "failed to create containerd container: ...: MemlockNotApplied: node gpu-0 did not apply "
                        "RLIMIT_MEMLOCK 4Mi that ulimits.noderesource.dev/container.memlock-probe asks")
          .spec();
  const Verdict v = judge(spec, &node, {laxPolicy()}, kNow);
  EXPECT_FALSE(v.validated);
  EXPECT_EQ(v.memlock, "not-applied");
  EXPECT_EQ(v.condition("MemlockUnlimited")->reason, "MemlockNotApplied");
  const std::string& m = v.condition("MemlockUnlimited")->message;
  EXPECT_NE(m.find("the agent's memlock-probe container asks for RLIMIT_MEMLOCK=4 MiB"), std::string::npos) << m;
  EXPECT_NE(m.find("the agent's held memlock-probe then starts by itself"), std::string::npos) << m;
  EXPECT_NE(v.condition("Validated")->message.find("the agent's memlock-probe is held back"), std::string::npos)
      << v.condition("Validated")->message;
}

// A policy that evicts from failing nodes (NoExecute) still only keeps new pods off a node
// whose one failure is a held memlock: its running pods got theirs, and evicting the held
// one would validate the node again (a flap).
TEST(Verdict, AHeldMemlockAloneNeverEvicts) {
  Node node = gpuNode(2);
  Policy evicting = laxPolicy();
  evicting.requirements.taintEffect = "NoExecute";
  const Verdict held = judge(probedSpec(), &node, {evicting}, kNow, memlockHeldOn("gpu-0", {heldPod("a")}));
  EXPECT_FALSE(held.validated);
  EXPECT_EQ(held.taintEffect, std::optional<std::string>("NoSchedule"));
  // With another failure too, the policy's effect stands.
  const Verdict stale = judge(probedSpec(), &node, {evicting}, kNow + 3600, memlockHeldOn("gpu-0", {heldPod("a")}));
  EXPECT_FALSE(stale.validated);
  EXPECT_EQ(stale.taintEffect, std::optional<std::string>("NoExecute"));
}

}  // namespace
}  // namespace podshaper
