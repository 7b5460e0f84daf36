#include "webhook/review.h"

#include <iostream>
#include <iterator>
#include <optional>
#include <vector>
#include <string>

#include <nlohmann/json.hpp>

#include "base/base64.h"
#include "cli/flags.h"
#include "shaping/admission.h"
#include "shaping/cluster_view.h"
#include "shaping/pod_claims.h"
#include "webhook/config_file.h"

namespace podshaper::webhook {
namespace {

// The request's pod with the response's patch applied, as the API server would store it.
nlohmann::json shapedPod(const std::string& input, const nlohmann::json& response) {
  nlohmann::json pod = nlohmann::json::parse(input)["request"].value("object", nlohmann::json());
  if (!response.contains("patch")) return pod;
  auto raw = base64Decode(response["patch"].get<std::string>());
  return pod.patch(nlohmann::json::parse(raw.ok() ? *raw : "[]"));
}

// What --cluster gives: the view, and the resource claims pods may name.
struct LoadedCluster {
  ClusterView view;
  ClaimLookup claims;
};

// `kubectl get namespaces,nodes,resourceclaimtemplates,resourceclaims -A -o json`: a List
// whose items are Namespaces and Nodes, and any ResourceClaimTemplates and ResourceClaims.
Result<LoadedCluster> loadCluster(const std::string& path) {
  auto text = cli::readFile(path);
  if (!text) return makeError("--cluster: " + text.error().message);
  nlohmann::json list = nlohmann::json::parse(*text, nullptr, false);
  if (!list.is_object() || !list.contains("items") || !list["items"].is_array()) {
    return makeError("--cluster " + path + ": expected a List, as from kubectl get namespaces,nodes -o json");
  }
  std::vector<nlohmann::json> namespaces, nodes, claims;
  for (const auto& item : list["items"]) {
    std::string kind = item.is_object() ? item.value("kind", std::string()) : std::string();
    if (kind == "Namespace") namespaces.push_back(item);
    else if (kind == "Node") nodes.push_back(item);
    else if (kind == "ResourceClaimTemplate" || kind == "ResourceClaim") claims.push_back(item);
  }
  return LoadedCluster{buildClusterView(namespaces, nodes), claimLookupOver(claims)};
}

}  // namespace

int runReview(int argc, char** argv) {
  auto flags = cli::Flags::parse(argc, argv, 2, {"config", "output", "cluster"});
  if (!flags) {
    std::cerr << "podshaper-webhook review: " << flags.error().message << "\n";
    return 2;
  }
  std::string output = flags->get("output", "review");
  if (output != "review" && output != "pod") {
    std::cerr << "podshaper-webhook review: --output must be review or pod\n";
    return 2;
  }
  auto config = loadConfig(flags->get("config"));
  if (!config) {
    std::cerr << "podshaper-webhook review: " << config.error().message << "\n";
    return 2;
  }
  std::optional<LoadedCluster> cluster;
  if (auto path = flags->get("cluster")) {
    auto loaded = loadCluster(*path);
    if (!loaded) {
      std::cerr << "podshaper-webhook review: " << loaded.error().message << "\n";
      return 2;
    }
    cluster = std::move(*loaded);
  }
  std::string input{std::istreambuf_iterator<char>(std::cin), std::istreambuf_iterator<char>()};
  auto decision = admit(input, *config, cluster ? &cluster->view : nullptr, kShaperVersion,
                        cluster ? cluster->claims : ClaimLookup());
  if (!decision) {
    std::cerr << "podshaper-webhook review: " << decision.error().message << "\n";
    return 2;
  }
  const nlohmann::json& response = decision->review["response"];
  if (output == "review") {
    std::cout << decision->review.dump(2) << "\n";
    return 0;
  }
  // --output pod: the pod on stdout; what kubectl would print on stderr.
  for (const auto& w : response.value("warnings", nlohmann::json::array())) {
    std::cerr << "Warning: " << w.get<std::string>() << "\n";
  }
  if (!decision->allowed) {
    std::cerr << "Error: denied: " << response["status"]["message"].get<std::string>() << "\n";
    return 0;
  }
  std::cout << shapedPod(input, response).dump(2) << "\n";
  return 0;
}

}  // namespace podshaper::webhook
