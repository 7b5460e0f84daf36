// The webhook writes a shaped pod's node requirements (and, on multi-node NVLink nodes, the
// podAffinity that keeps its job in one NVLink domain); the operator explains, from the same
// requirements, why such a pod waits. Both read api/node_labels.h. Here the webhook's real
// output is fed to the operator's explanation, one requirement kind at a time, so that a
// change to one side that the other does not follow fails.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "api/node_labels.h"
#include "judging/node_facts.h"
#include "judging/pending.h"
#include "shaping/pod_shaper.h"
#include "tests/unit/shaping/pod_builder.h"

namespace podshaper {
namespace {

using nlohmann::json;

constexpr long long kCreated = 1795000000;
const MemlockLimit kAsked{4194304};  // 4Mi: two terms, In [unlimited] or Gt [4194303]

// An 8-GPU node as the operator labels it, then changed by `change`.
Node labelled(const std::string& name, const std::vector<std::pair<std::string_view, std::string>>& change = {}) {
  Node n = testing::gpuNode(name, 8);
  for (const auto& [key, value] : change) {
    if (value.empty()) {
      n.labels.erase(key);
    } else {
      n.labels.set(key, value);
    }
  }
  return n;
}

// The webhook's pod for a cluster of `nodes`: 8 GPUs, node-exclusive, one node (so that
// NCCL's P2P is asked of nodes that have it).
ShapeOutcome shaped(const std::vector<Node>& nodes) {
  ClusterView cluster;
  cluster.nodes = nodes;
  Config config;
  config.node.memlock = kAsked;
  AdmissionContext ctx;
  ctx.namespaceName = "ml";
  ctx.cluster = &cluster;
  json pod = testing::TrainingPod().at("/spec/containers/0/env", json::array({{{"name", "PET_NNODES"}, {"value", "1"}}}));
  return shapePod(pod, config, ctx);
}

// The shaped pod, waiting unscheduled for a minute, as the operator's cache holds it.
json waiting(json pod) {
  pod["metadata"]["uid"] = "uid-1";
  pod["metadata"]["creationTimestamp"] = "2026-11-18T11:06:40Z";
  pod["status"] = {{"phase", "Pending"}};
  return pod;
}

NodeFacts factsOf(const Node& n) {
  NodeFacts f;
  f.node = n;
  return f;
}

PendingJudgement explain(const json& pod, const Node& node) {
  return judgePending(waiting(pod), {factsOf(node)}, kCreated + 60, 30);
}

// What the webhook wrote: each requirement's words, across the terms.
std::vector<std::string> written(const json& pod) {
  std::vector<std::string> out;
  for (const json& term : pod["spec"]["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
                              ["nodeSelectorTerms"]) {
    for (const json& r : term["matchExpressions"]) out.push_back(requirementFromJson(r).words());
  }
  return out;
}

TEST(PlacementContract, TheWebhookWritesEveryKindOfRequirement) {
  const ShapeOutcome out = shaped({labelled("a")});
  ASSERT_TRUE(out.allowed) << out.message;
  const auto words = written(out.pod);
  for (const char* kind : {"podshaper.io/topology-validated=true", "podshaper.io/memlock=unlimited",
                           "podshaper.io/memlock Gt [4194303]", "podshaper.io/gpu-count=8", "podshaper.io/p2p=all"}) {
    EXPECT_NE(std::find(words.begin(), words.end(), kind), words.end()) << kind;
  }
}

TEST(PlacementContract, TheExplanationNamesTheRequirementEachNodeFails) {
  const ShapeOutcome out = shaped({labelled("a")});
  ASSERT_TRUE(out.allowed) << out.message;
  struct Case {
    const char* what;
    Node node;
    PendingCause cause;
    const char* says;  // in the NotPlaceable message
  };
  const std::vector<Case> cases = {
      {"meets all", labelled("fits"), PendingCause::kScheduler, "1 node meets all of it (fits)"},
      {"grants exactly the memlock asked", labelled("exact", {{names::kMemlock, memlockLabel(kAsked)}}),
       PendingCause::kScheduler, "meets all of it (exact)"},
      {"grants less memlock", labelled("low", {{names::kMemlock, "4194303"}}), PendingCause::kMemlock,
       "1 does not grant that memlock (memlock 4194303: low)"},
      {"not validated", labelled("bad", {{names::kTopologyValidated, "false"}}), PendingCause::kValidated,
       "1 is not validated"},
      {"not judged", labelled("new", {{names::kTopologyValidated, ""}}), PendingCause::kValidated,
       "(not judged by podshaper: new)"},
      {"other GPU count", labelled("four", {{names::kGpuCount, "4"}}), PendingCause::kGpuCount,
       "1 does not have 8 GPUs (4 GPUs: four)"},
      {"no P2P", labelled("pcie", {{names::kP2P, "partial"}}), PendingCause::kP2P, "1 lacks P2P"},
  };
  for (const Case& c : cases) {
    const PendingJudgement j = explain(out.pod, c.node);
    ASSERT_TRUE(j.event) << c.what;
    EXPECT_EQ(toString(j.cause), toString(c.cause)) << c.what << ": " << j.event->message;
    EXPECT_NE(j.event->message.find(c.says), std::string::npos) << c.what << ": " << j.event->message;
    // The requirements the webhook wrote, read back in the operator's words.
    EXPECT_NE(j.event->message.find("It needs a node that has 8 GPUs (podshaper.io/gpu-count=8), is validated by "
                                    "podshaper (podshaper.io/topology-validated=true), grants memlock at least 4Mi "
                                    "or unlimited (podshaper.io/memlock), has P2P between all its GPUs "
                                    "(podshaper.io/p2p=all) and runs no other node-exclusive pod."),
              std::string::npos)
        << c.what << ": " << j.event->message;
  }
}

TEST(PlacementContract, TheWebhookWaitsForTheNodesTheExplanationSaysFail) {
  // The webhook's own judgement of a cluster of one node of the size asked, against the
  // operator's explanation of the pod it shaped there.
  for (const auto& change : std::vector<std::vector<std::pair<std::string_view, std::string>>>{
           {}, {{names::kMemlock, memlockLabel(kAsked)}}, {{names::kMemlock, "4194303"}},
           {{names::kMemlock, std::string(names::kMemlockNotGranted)}}, {{names::kTopologyValidated, "false"}}}) {
    const Node node = labelled("n", change);
    const ShapeOutcome out = shaped({node, labelled("other", {{names::kTopologyValidated, "false"}})});
    ASSERT_TRUE(out.allowed) << out.message;
    bool webhookWaits = false;
    for (const auto& w : out.warnings) webhookWaits |= w.find("can take the pod now") != std::string::npos;
    const PendingJudgement j = explain(out.pod, node);
    EXPECT_EQ(webhookWaits, j.cause != PendingCause::kScheduler)
        << (change.empty() ? "as labelled" : change.front().second) << ": " << j.event->message;
  }
}

// Multi-node NVLink: 4-GPU trays in NVLink domains a and b, and Job llama's pod of 4 GPUs
// across 8 nodes with its IMEX channel, as tests/golden/cases/mnnvl-job-8-pods-one-domain.
constexpr const char* kDomainA = "8a3e5f2c-1b4d-4e6f-9a7b-2c3d4e5f6a7b.1";
constexpr const char* kDomainB = "8a3e5f2c-1b4d-4e6f-9a7b-2c3d4e5f6a7b.2";

std::vector<Node> twoRacks() {
  std::vector<Node> nodes;
  for (const char* domain : {kDomainA, kDomainB}) {
    for (int i = 0; i < 9; ++i) {
      Node n = testing::gpuNode(std::string(domain == kDomainA ? "a" : "b") + std::to_string(i), 4);
      n.labels.set(names::kNvlinkDomain, domain);
      nodes.push_back(std::move(n));
    }
  }
  return nodes;
}

ShapeOutcome shapedLlamaPod(const std::string& name, const std::vector<Node>& nodes) {
  ClusterView cluster = clusterViewOf({}, nodes);
  const json channel = {
      {"kind", "ResourceClaimTemplate"},
      {"metadata", {{"name", "imex"}, {"namespace", "ml"}}},
      {"spec", {{"spec", {{"devices", {{"requests", json::array({{{"name", "channel"},
                                                                   {"exactly", {{"deviceClassName",
                                                                                 "compute-domain-default-channel.nvidia.com"}}}}})}}}}}}}};
  AdmissionContext ctx;
  ctx.namespaceName = "ml";
  ctx.cluster = &cluster;
  ctx.claims = claimLookupOver({channel});
  json pod = testing::TrainingPod()
                 .withGpus(4)
                 .at("/metadata/name", name)
                 .at("/metadata/ownerReferences", json::array({{{"kind", "Job"}, {"name", "llama"}, {"controller", true}}}))
                 .at("/spec/containers/0/env", json::array({{{"name", "PET_NNODES"}, {"value", "8"}}}))
                 .at("/spec/resourceClaims", json::array({{{"name", "imex"}, {"resourceClaimTemplateName", "imex"}}}))
                 .at("/spec/containers/0/resources/claims", json::array({{{"name", "imex"}}}));
  return shapePod(pod, Config{}, ctx);
}

TEST(PlacementContract, TheJobsNvlinkDomainIsExplainedFromTheWebhooksTerm) {
  const std::vector<Node> nodes = twoRacks();
  // The job's first 8 pods, shaped by the webhook and bound in domain a; a8 runs another job's pod.
  std::vector<json> bound;
  for (int i = 0; i < 8; ++i) {
    ShapeOutcome out = shapedLlamaPod("llama-" + std::to_string(i), nodes);
    ASSERT_TRUE(out.allowed) << out.message;
    out.pod["spec"]["nodeName"] = "a" + std::to_string(i);
    out.pod["status"] = {{"phase", "Running"}};
    bound.push_back(std::move(out.pod));
  }
  bound.push_back({{"metadata", {{"name", "other-0"}, {"namespace", "train"},
                                 {"labels", {{"podshaper.io/placement", "node-exclusive"}}}}},
                   {"spec", {{"nodeName", "a8"}}},
                   {"status", {{"phase", "Running"}}}});
  std::vector<NodeFacts> facts;
  for (const Node& n : nodes) facts.push_back(factsOf(n));

  const ShapeOutcome ninth = shapedLlamaPod("llama-8", nodes);
  ASSERT_TRUE(ninth.allowed) << ninth.message;
  // None bound yet: any domain will do, nothing is said of them.
  PendingJudgement j = judgePending(waiting(ninth.pod), facts, kCreated + 60, 30);
  ASSERT_TRUE(j.event);
  EXPECT_EQ(j.cause, PendingCause::kScheduler) << j.event->message;
  EXPECT_EQ(j.event->message.find("NVLink"), std::string::npos) << j.event->message;

  addBoundPods(facts, bound);
  j = judgePending(waiting(ninth.pod), facts, kCreated + 60, 30);
  ASSERT_TRUE(j.event);
  const std::string& m = j.event->message;
  EXPECT_EQ(j.cause, PendingCause::kNvlinkDomain) << m;
  EXPECT_NE(m.find("is in NVLink domain " + std::string(kDomainA) + " with its job's other pods "
                   "(podshaper.io/nvlink-group=job.llama)"),
            std::string::npos)
      << m;
  EXPECT_NE(m.find("9 are not in the job's NVLink domain (NVLink domain " + std::string(kDomainB)), std::string::npos) << m;
  EXPECT_NE(m.find("In the job's NVLink domain, all 9 nodes are taken (8 by this job, 1 by train/other-0); NVLink domain " +
                   std::string(kDomainB) + " has 9 free nodes: gang scheduling"),
            std::string::npos)
      << m;
}

}  // namespace
}  // namespace podshaper
