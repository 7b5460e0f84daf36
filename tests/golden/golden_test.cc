// Golden tests: an AdmissionReview in, the shaped pod out. Each directory under
// cases/ holds review.json, optionally config.yaml and cluster.json (Namespaces,
// Nodes, ResourceClaimTemplates and ResourceClaims under "resourceClaims", and
// ShmProfiles under "shmProfiles", as the API serves them; "now", the admission's
// time), and expected.json: the decision and the
// pod after applying the returned JSON Patch, as the API server would.
// PODSHAPER_UPDATE_GOLDEN=1 rewrites expected.json; review the diff.

#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "api/shm_profile.h"
#include "base/base64.h"
#include "base/timefmt.h"
#include "shaping/admission.h"
#include "shaping/cluster_view.h"

namespace podshaper {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

std::string slurp(const fs::path& p) {
  std::ifstream in(p);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

ClusterView clusterFrom(const json& j) {
  return buildClusterView(j.value("namespaces", json::array()), j.value("nodes", json::array()));
}

json outcome(const fs::path& dir) {
  Config config;
  if (fs::exists(dir / "config.yaml")) {
    auto parsed = parseConfig(slurp(dir / "config.yaml"));
    EXPECT_TRUE(parsed.ok()) << parsed.error().message;
    if (parsed) config = *parsed;
  }
  std::optional<ClusterView> cluster;
  ClaimLookup claims;  // the cluster's resourceClaims (templates and claims), when it has a view
  ShmProfileLookup profiles;
  int64_t now = 0;
  if (fs::exists(dir / "cluster.json")) {
    json j = json::parse(slurp(dir / "cluster.json"));
    cluster = clusterFrom(j);
    claims = claimLookupOver(j.value("resourceClaims", json::array()));
    if (j.contains("shmProfiles")) {
      profiles = [list = j["shmProfiles"]](std::string_view ns, std::string_view name) -> std::optional<json> {
        for (const json& p : list) {
          if (p["metadata"].value("namespace", "") == ns && p["metadata"].value("name", "") == name) {
            json kept = p;
            keepShmProfile(kept);  // as the webhook's watch keeps it
            return kept;
          }
        }
        return std::nullopt;
      };
    }
    if (j.contains("now")) now = parseTime(j["now"].get<std::string>()).value_or(0);
  }
  std::string body = slurp(dir / "review.json");
  auto decision = admit(body, config, cluster ? &*cluster : nullptr, "podshaper-webhook/golden", claims, profiles, now);
  if (!decision) return {{"error", decision.error().message}};
  const json& response = decision->review["response"];
  EXPECT_EQ(decision->body(), decision->review.dump()) << dir << ": the answer's bytes";
  json out = {{"allowed", decision->allowed}, {"warnings", response.value("warnings", json::array())}};
  if (!decision->allowed) out["message"] = response["status"]["message"];
  json pod = json::parse(body)["request"]["object"];
  if (response.contains("patch")) {
    auto raw = base64Decode(response["patch"].get<std::string>());
    EXPECT_TRUE(raw.ok()) << dir << ": the patch is not base64";
    pod = pod.patch(json::parse(raw.ok() ? *raw : "[]"));
    // The patch must be a no-op on the shaped pod: reinvocation changes nothing.
    json again = json::parse(body);
    again["request"]["object"] = pod;
    auto second =
        admit(again.dump(), config, cluster ? &*cluster : nullptr, "podshaper-webhook/golden", claims, profiles, now);
    EXPECT_TRUE(second.ok() && !second->mutated) << dir << ": a second admission patched again";
  }
  out["pod"] = pod;
  return out;
}

class Golden : public testing::TestWithParam<fs::path> {};

TEST_P(Golden, Matches) {
  const fs::path dir = GetParam();
  json actual = outcome(dir);
  fs::path expectedFile = dir / "expected.json";
  const char* update = std::getenv("PODSHAPER_UPDATE_GOLDEN");
  if (update != nullptr && std::string(update) == "1") {
    std::ofstream(expectedFile) << actual.dump(2) << "\n";
    GTEST_SKIP() << "updated " << expectedFile;
  }
  ASSERT_TRUE(fs::exists(expectedFile)) << "missing " << expectedFile << " (run with PODSHAPER_UPDATE_GOLDEN=1)";
  json expected = json::parse(slurp(expectedFile));
  EXPECT_EQ(actual, expected) << "diff (expected → actual): " << json::diff(expected, actual).dump(2);
}

std::vector<fs::path> cases() {
  std::vector<fs::path> dirs;
  for (const auto& entry : fs::directory_iterator(PODSHAPER_GOLDEN_DIR)) {
    if (entry.is_directory()) dirs.push_back(entry.path());
  }
  std::sort(dirs.begin(), dirs.end());
  return dirs;
}

INSTANTIATE_TEST_SUITE_P(Cases, Golden, testing::ValuesIn(cases()), [](const auto& info) {
  std::string name = info.param.filename().string();
  for (char& c : name) if (!isalnum(static_cast<unsigned char>(c))) c = '_';
  return name;
});

TEST(GoldenCases, ThereAreCases) { EXPECT_GE(cases().size(), 8u); }

// A webhook thread reads each review into the tree the review before left
// (shaping/admission.cc): every case is answered the same whichever came before it, as
// on a thread of its own.
TEST(GoldenCases, AnswersDoNotDependOnTheReviewBefore) {
  const std::vector<fs::path> all = cases();
  std::vector<json> alone(all.size());
  for (std::size_t i = 0; i < all.size(); ++i) std::thread([&] { alone[i] = outcome(all[i]); }).join();
  for (bool backwards : {false, true}) {
    for (std::size_t k = 0; k < all.size(); ++k) {
      const std::size_t i = backwards ? all.size() - 1 - k : k;
      EXPECT_EQ(outcome(all[i]), alone[i]) << all[i] << (backwards ? " (backwards)" : "");
    }
  }
}

}  // namespace
}  // namespace podshaper
