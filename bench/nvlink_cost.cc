// What multi-node NVLink costs an admission at scale: the same pod (a Job's rank of 4 GPUs
// whose job spans 8 nodes, with its IMEX channel claim) admitted on a cluster of N GB200-like
// nodes in NVLink domains of 18 (each domain its own node kind, whose domains the node class
// counts on every admission), beside the same nodes in no domain (one kind), taking turns
// chunk by chunk so that what else runs on the machine weighs on both alike.
//
//   nvlink_cost [--nodes N] [--min-seconds S]
//
// Exit status 1 when an admission was not shaped as expected (the MNNVL one kept in one
// domain with the P2P reserve, the other not), or when the MNNVL admission costs more than
// 2× the other (its work should grow with the domains, a few strings each, not dominate).
#include <algorithm>
#include <cstdio>
#include <functional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "api/names.h"
#include "base/base64.h"
#include "bench/bench_util.h"
#include "shaping/admission.h"
#include "shaping/pod_claims.h"

namespace {

using nlohmann::json;
using podshaper::bench::readFile;
using podshaper::bench::threadCpuSeconds;
namespace names = podshaper::names;

constexpr std::size_t kNodesPerDomain = 18;  // an NVL72 rack: 18 nodes of 4 GPUs
constexpr double kCeiling = 2.0;

podshaper::ClusterView rack(std::size_t nodes, bool inDomains) {
  std::vector<podshaper::Node> all;
  all.reserve(nodes);
  for (std::size_t i = 0; i < nodes; ++i) {
    podshaper::Node n = podshaper::bench::validatedNode("gb200-" + std::to_string(i), 4, 864LL << 30);
    if (inDomains) {
      char uuid[64];
      std::snprintf(uuid, sizeof uuid, "8a3e5f2c-1b4d-4e6f-9a7b-%012zx.1", i / kNodesPerDomain);
      n.labels.set(std::string(names::kNvlinkDomain), uuid);
    }
    all.push_back(std::move(n));
  }
  return podshaper::clusterViewOf({{"ml", {}}}, std::move(all));
}

// The realistic pod as a Job's rank of 4 GPUs on 8 nodes, using the IMEX channel claim.
std::string jobReview(const std::string& text) {
  json review = json::parse(text);
  json& pod = review["request"]["object"];
  pod["metadata"]["ownerReferences"] = json::array({{{"apiVersion", "batch/v1"}, {"kind", "Job"}, {"name", "llama"},
                                                     {"uid", "u"}, {"controller", true}}});
  pod["spec"]["resourceClaims"] = json::array({{{"name", "imex"}, {"resourceClaimTemplateName", "imex"}}});
  json& trainer = pod["spec"]["containers"][0];
  for (const char* kind : {"limits", "requests"}) trainer["resources"][kind][std::string(names::kGpuResource)] = "4";
  trainer["resources"]["claims"] = json::array({{{"name", "imex"}}});
  trainer["command"] = json::array({"torchrun", "--nnodes=8", "--nproc-per-node=4", "train.py"});
  pod["metadata"]["annotations"]["podshaper.io/ranks-per-pod"] = "4";
  return review.dump();
}

json channelTemplate() {
  return {{"apiVersion", "resource.k8s.io/v1"},
          {"kind", "ResourceClaimTemplate"},
          {"metadata", {{"name", "imex"}, {"namespace", "ml"}}},
          {"spec", {{"spec", {{"devices", {{"requests", json::array({{{"name", "channel"},
                                                                        {"exactly", {{"deviceClassName",
                                                                                      "compute-domain-default-channel.nvidia.com"}}}}})}}}}}}}};
}

}  // namespace

int main(int argc, char** argv) {
  std::size_t nodes = 12528;  // 696 racks: the 12,500-node scale of docs/BENCHMARKS.md
  double minSeconds = 2.0;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--nodes" && i + 1 < argc) {
      nodes = std::stoul(argv[++i]);
    } else if (a == "--min-seconds" && i + 1 < argc) {
      minSeconds = std::stod(argv[++i]);
    } else {
      std::fprintf(stderr, "usage: nvlink_cost [--nodes N] [--min-seconds S]\n");
      return 2;
    }
  }
  const std::string text = readFile(PODSHAPER_BENCH_DIR "/inputs/realistic-pod.json");
  if (text.empty()) {
    std::fprintf(stderr, "nvlink_cost: cannot read %s\n", PODSHAPER_BENCH_DIR "/inputs/realistic-pod.json");
    return 2;
  }
  const std::string body = jobReview(text);
  const podshaper::Config config;
  const podshaper::ClaimLookup claims = podshaper::claimLookupOver({channelTemplate()});
  const podshaper::ClusterView views[] = {rack(nodes, false), rack(nodes, true)};
  const char* labels[] = {"no NVLink domain", "NVLink domains of 18"};

  // What each admission decided, checked once: the MNNVL one kept in one domain with P2P's reserve.
  bool ok = true;
  for (int v = 0; v < 2; ++v) {
    auto decision = podshaper::admit(body, config, &views[v], "podshaper-webhook/bench", claims);
    const std::string out = decision ? decision->body() : decision.error().message;
    std::string patch;
    if (decision) {
      const json& response = decision->review["response"];
      if (auto decoded = podshaper::base64Decode(response.value("patch", std::string()))) patch = *decoded;
    }
    const bool kept = patch.find("podshaper.io/nvlink-group") != std::string::npos &&
                      patch.find("all kept within") != std::string::npos;
    if (!decision || !decision->review["response"].value("allowed", false) || kept != (v == 1)) {
      std::fprintf(stderr, "nvlink_cost: the admission on %s was not shaped as expected: %s\n", labels[v],
                   patch.empty() ? out.c_str() : patch.c_str());
      ok = false;
    }
  }
  if (!ok) return 1;

  // Turns of 20 admissions each, the median turn of each.
  constexpr int kChunk = 20;
  std::vector<double> chunks[2];
  podshaper::AdmissionScratch scratch;  // as a webhook thread keeps it between reviews
  const double start = threadCpuSeconds();
  do {
    for (int v = 0; v < 2; ++v) {
      const double t = threadCpuSeconds();
      for (int k = 0; k < kChunk; ++k) {
        auto decision = podshaper::admit(scratch, body, config, &views[v], "podshaper-webhook/bench", claims);
        std::string out = decision->body();
        if (out.empty()) std::abort();
      }
      chunks[v].push_back((threadCpuSeconds() - t) / kChunk);
    }
  } while (threadCpuSeconds() - start < minSeconds || chunks[0].size() < 5);
  double us[2];
  for (int v = 0; v < 2; ++v) {
    auto& c = chunks[v];
    std::nth_element(c.begin(), c.begin() + static_cast<std::ptrdiff_t>(c.size() / 2), c.end());
    us[v] = c[c.size() / 2] * 1e6;
  }
  const double ratio = us[1] / us[0];
  std::printf("nodes %zu: %-22s %zu kind(s)  %8.1f µs an admission\n", nodes, labels[0], views[0].kinds.size(), us[0]);
  std::printf("nodes %zu: %-22s %zu kind(s)  %8.1f µs an admission  (%.2f×; ceiling %.1f×)\n", nodes, labels[1],
              views[1].kinds.size(), us[1], ratio, kCeiling);
  return ratio > kCeiling ? 1 : 0;
}
