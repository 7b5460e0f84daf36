// No input crashes the shaping path: AdmissionReviews mutated at random (values
// swapped for other types, numbers, odd strings, keys dropped) must give an
// AdmissionReview or a clean error, never an exception or a crash.

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <random>
#include <sstream>

#include "api/topology.h"
#include "pod_builder.h"
#include "shaping/admission.h"
#include "shaping/memlock_pod.h"

namespace podshaper {
namespace {

using nlohmann::json;

const std::vector<json>& replacements() {
  static const std::vector<json> values = {
      nullptr, true, 0, -1, 1.5, 18446744073709551615ULL, "", "-1", "99999999999999999999999",
      "1e400", "12Qi", "0", "Mi", "/dev/shm", "nvidia.com/gpu", json::array(), json::object(),
      json::array({nullptr}), json::object({{"x", 1}})};
  return values;
}

// A Pod CREATE for the webhook, as the API server sends it.
json createReview(json pod) {
  return {{"apiVersion", "admission.k8s.io/v1"},
          {"kind", "AdmissionReview"},
          {"request",
           {{"uid", "u"},
            {"kind", {{"group", ""}, {"version", "v1"}, {"kind", "Pod"}}},
            {"namespace", "ml"},
            {"operation", "CREATE"},
            {"object", std::move(pod)}}}};
}

// Every JSON pointer in the document.
void pointers(const json& j, const json::json_pointer& at, std::vector<json::json_pointer>& out) {
  out.push_back(at);
  if (j.is_object()) {
    for (const auto& [k, v] : j.items()) pointers(v, at / k, out);
  } else if (j.is_array()) {
    for (std::size_t i = 0; i < j.size(); ++i) pointers(j[i], at / i, out);
  }
}

TEST(Robustness, RandomlyMutatedReviewsNeverThrow) {
  json base = createReview(testing::TrainingPod().json());
  base["request"]["object"]["spec"]["volumes"] = json::array({{{"name", "shm"}, {"emptyDir", {{"sizeLimit", "1Gi"}}}}});
  base["request"]["object"]["spec"]["containers"][0]["volumeMounts"] = json::array({{{"name", "shm"}, {"mountPath", "/dev/shm"}}});
  base["request"]["object"]["spec"]["containers"][0]["env"] = json::array({{{"name", "PET_NPROC_PER_NODE"}, {"value", "8"}}});
  base["request"]["object"]["spec"]["affinity"] = json::parse(
      R"({"nodeAffinity":{"requiredDuringSchedulingIgnoredDuringExecution":{"nodeSelectorTerms":[{"matchExpressions":[]}]}}})");
  ClusterView cluster;
  cluster.nodes = {testing::gpuNode("a", 8)};
  cluster.namespaceLabels["ml"] = {{"pod-security.kubernetes.io/enforce", "privileged"}};

  std::mt19937 rng(20261121);
  int denials = 0, errors = 0, admitted = 0;
  for (int round = 0; round < 3000; ++round) {
    json doc = base;
    int edits = 1 + static_cast<int>(rng() % 3);
    for (int e = 0; e < edits; ++e) {
      std::vector<json::json_pointer> ptrs;
      pointers(doc, json::json_pointer(), ptrs);
      const auto& target = ptrs[rng() % ptrs.size()];
      if (target.empty()) continue;
      if (rng() % 4 == 0) {
        doc[target.parent_pointer()].is_object() ? (void)doc[target.parent_pointer()].erase(target.back())
                                                 : (void)(doc[target] = nullptr);
      } else {
        doc[target] = replacements()[rng() % replacements().size()];
      }
    }
    Result<AdmissionDecision> d = makeError("unset");
    ASSERT_NO_THROW(d = admit(doc.dump(), Config{}, round % 2 ? &cluster : nullptr, "v")) << doc.dump();
    if (!d) ++errors;
    else if (!d->allowed) ++denials;
    else ++admitted;
  }
  // The mutations must reach every outcome, or the test proves little.
  EXPECT_GT(denials, 100);
  EXPECT_GT(errors, 10);
  EXPECT_GT(admitted, 100);
}

TEST(Robustness, DeepNestingIsRefused) {
  std::string deep = R"({"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"uid":"u","x":)" +
                     std::string(100000, '[') + std::string(100000, ']') + "}}";
  auto d = admit(deep, Config{}, nullptr, "v");
  ASSERT_FALSE(d.ok());
  EXPECT_NE(d.error().message.find("nested deeper than 128"), std::string::npos);
  // Brackets inside strings do not count.
  json review = {{"apiVersion", "admission.k8s.io/v1"}, {"kind", "AdmissionReview"},
                 {"request", {{"uid", std::string(1000, '[') + "\\\"" }}}};
  EXPECT_TRUE(admit(review.dump(), Config{}, nullptr, "v").ok());
}

// Found with fuzz/annotations_fuzzer.cc (fuzz/regressions/annotations/): GPU
// counts whose sum passes 64 bits wrapped, and the pod was shaped as one with
// 0 GPUs (0 ranks, a 0-byte /dev/shm).
TEST(Robustness, PodGpusPast64BitsAreDenied) {
  json review = createReview(testing::TrainingPod()
                                  .annotate("podshaper.io/placement", "shared")
                                  .at("/spec/containers/0/resources/limits/nvidia.com~1gpu", "18446744073709551615")
                                  .withContainer({{"name", "sidecar"},
                                                  {"resources", {{"limits", {{"nvidia.com/gpu", "1"}}}}}})
                                  .json());
  auto d = admit(review.dump(), Config{}, nullptr, "v");
  ASSERT_TRUE(d.ok()) << d.error().message;
  ASSERT_FALSE(d->allowed) << d->review.dump();
  EXPECT_NE(d->review["response"]["status"]["message"].get<std::string>().find(
                "container \"sidecar\": nvidia.com/gpu 1 takes the pod's GPUs past 64 bits"),
            std::string::npos)
      << d->review.dump();
}

// Found with fuzz/annotations_fuzzer.cc (fuzz/regressions/annotations/): a
// user's ulimit list in flow style (or indented, or ended with "...") got the
// memlock entry appended as text, which is not YAML the NRI plugin can read:
// the container would not be created. Such lists are written out again.
TEST(Robustness, UlimitListsOfEveryYamlStyleGetMemlock) {
  const std::string memlock = "- type: RLIMIT_MEMLOCK\n  soft: 18446744073709551615\n  hard: 18446744073709551615\n";
  const std::string key = "ulimits.noderesource.dev/container.trainer";
  struct Case {
    std::string own, extended;
  };
  for (const auto& c : std::vector<Case>{
           {"- type: nofile\n  soft: 1\n  hard: 1", "- type: nofile\n  soft: 1\n  hard: 1\n" + memlock},
           {"[{type: nofile, soft: 1024, hard: 1024}]", "- {type: nofile, soft: 1024, hard: 1024}\n" + memlock},
           {"[]", memlock},
           {"  - type: nofile\n    soft: 1\n    hard: 1\n", "- type: nofile\n  soft: 1\n  hard: 1\n" + memlock},
           {"- type: nofile\n  soft: 1\n  hard: 1\n...\n", "- type: nofile\n  soft: 1\n  hard: 1\n" + memlock}}) {
    auto out = memlockAnnotation(json{{key, c.own}}, "trainer", MemlockLimit{});
    ASSERT_TRUE(out.set.has_value()) << c.own;
    EXPECT_EQ(out.set->first, key);
    EXPECT_EQ(out.set->second, c.extended) << c.own;
    EXPECT_FALSE(out.warning.has_value()) << *out.warning;
  }
  // yaml-cpp reads a NUL in a scalar as a lone 0x85 byte: written out again, the
  // annotation was not UTF-8 and admit() threw from the JSON Patch's dump().
  using namespace std::string_literals;
  auto nul = memlockAnnotation(json{{key, "[{type\0N: nofile, soft: 1, hard: 1}]"s}}, "trainer", MemlockLimit{});
  EXPECT_FALSE(nul.set.has_value()) << nul.set->second;
  ASSERT_TRUE(nul.warning.has_value());
  EXPECT_NE(nul.warning->find("could not be extended with memlock; left as it is"), std::string::npos) << *nul.warning;
}

// Found with fuzz/nvidia_smi_fuzzer.cc (fuzz/regressions/nvidia_smi/): an NV<n>
// count past int wrapped (NV4294967314 read as 18 NVLinks), one past 1024 came
// back from toJson → topologyFromJson as 0, and NV0 was an NVLink with no links.
TEST(Robustness, NvidiaSmiLinkCountsOutsideOneTo1024AreNotLinks) {
  auto pair = [](const std::string& link) {
    return "\tGPU0\tGPU1\tCPU Affinity\nGPU0\t X \t" + link + "\t0-1\nGPU1\t" + link + "\t X \t0-1\n";
  };
  for (const std::string link : {"NV0", "NV1025", "NV4294967314", "NV18446744073709551634"}) {
    auto topo = parseNvidiaSmiTopology(pair(link));
    ASSERT_FALSE(topo.ok()) << link;
    EXPECT_NE(topo.error().message.find("\"" + link + "\" is not a link class"), std::string::npos)
        << topo.error().message;
  }
  for (int n : {1, 18, 1024}) {
    auto topo = parseNvidiaSmiTopology(pair("NV" + std::to_string(n)));
    ASSERT_TRUE(topo.ok()) << topo.error().message;
    EXPECT_EQ(topo->pairs.at(0).nvlinks, n);
    auto back = topologyFromJson(toJson(*topo));
    ASSERT_TRUE(back.ok()) << back.error().message;
    EXPECT_EQ(back->pairs.at(0).nvlinks, n);
  }
}

}  // namespace
}  // namespace podshaper
