// No input crashes the shaping path: AdmissionReviews mutated at random (values
// swapped for other types, numbers, odd strings, keys dropped) must give an
// AdmissionReview or a clean error, never an exception or a crash.

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <random>
#include <sstream>

#include "core/admission.h"
#include "pod_builder.h"

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
  json base = {{"apiVersion", "admission.k8s.io/v1"},
               {"kind", "AdmissionReview"},
               {"request",
                {{"uid", "u"},
                 {"kind", {{"group", ""}, {"version", "v1"}, {"kind", "Pod"}}},
                 {"namespace", "ml"},
                 {"operation", "CREATE"},
                 {"object", testing::TrainingPod().json()}}}};
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

}  // namespace
}  // namespace podshaper
