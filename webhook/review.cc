#include "webhook/review.h"

#include <chrono>
#include <iostream>
#include <iterator>
#include <map>
#include <string>

#include "api/dra.h"
#include "api/names.h"
#include "base/base64.h"
#include "base/json_util.h"
#include "cli/documents.h"
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

// `kubectl get namespaces,nodes,resourceclaimtemplates,resourceclaims,shmprofiles -A -o json`:
// a List whose items are Namespaces and Nodes, and any ResourceClaimTemplates,
// ResourceClaims and ShmProfiles.
// JSON or YAML; a NodeList's items, which the API server writes without their kind, too.
Result<ClusterObjects> loadCluster(const std::string& path) {
  auto text = cli::readFile(path);
  if (!text) return makeError("--cluster: " + text.error().message);
  auto documents = cli::readDocuments(*text);
  if (!documents) return makeError("--cluster " + path + ": " + documents.error().message);
  ClusterObjects cluster;
  bool lists = false;
  for (const auto& list : *documents) {
    if (!member(list, "items").is_array()) continue;
    lists = true;
    for (const auto& item : list["items"]) cluster.take(itemWithKind(item, list));
  }
  if (!lists) return makeError("--cluster " + path + ": expected a List, as from kubectl get namespaces,nodes -o json");
  return cluster;
}

// The AdmissionReview form: the review's response, or with --output pod the pod as the API
// server would store it.
int reviewAdmission(const cli::Flags& flags, const Config& config, const ClusterObjects* cluster) {
  const std::string output = flags.get("output", "review");
  std::string input{std::istreambuf_iterator<char>(std::cin), std::istreambuf_iterator<char>()};
  std::optional<ClusterView> view;
  ClaimLookup claims;
  ShmProfileLookup shmProfiles;
  if (cluster) {
    view = buildClusterView(cluster->namespaces, cluster->nodes);
    claims = cluster->claimLookup(config);
    shmProfiles = shmProfileLookupOver(cluster->shmProfiles);
  }
  auto decision = admit(input, config, view ? &*view : nullptr, kShaperVersion, claims, shmProfiles, nowSeconds());
  if (!decision) return reviewFailed(decision.error().message);
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
    return 1;  // as kubectl exits when the API server refuses
  }
  std::cout << cli::toJson(shapedPod(input, response), cli::jsonLayout(input).under("/request/object"));
  return 0;
}

}  // namespace

bool ClusterObjects::take(const nlohmann::json& object) {
  const std::string kind = stringMember(object, "kind");
  if (kind == "Namespace") namespaces.push_back(object);
  else if (kind == "Node") nodes.push_back(object);
  else if (kind == "ResourceClaimTemplate" || kind == "ResourceClaim") claims.push_back(object);
  else if (isComputeDomain(object)) computeDomains.push_back(object);
  else if (kind == names::kShmProfileKind) shmProfiles.push_back(object);
  else if (kind != "DeviceClass") return false;
  return true;
}

ClaimLookup ClusterObjects::claimLookup(const Config& config) const {
  std::vector<std::string> warnings;
  auto all = withChannelTemplates(claims, computeDomains, config.mnnvl.computeDomainChannelClass, warnings);
  for (const auto& w : warnings) std::cerr << "Warning: " << w << "\n";
  return claimLookupOver(all);
}

ShmProfileLookup shmProfileLookupOver(const std::vector<nlohmann::json>& profiles) {
  std::map<std::string, nlohmann::json, std::less<>> byName;  // "namespace/name"
  for (const auto& p : profiles) {
    const nlohmann::json& metadata = member(p, "metadata");
    if (stringMember(metadata, "name").empty()) continue;
    byName[stringMember(metadata, "namespace") + "/" + stringMember(metadata, "name")] = p;
  }
  return [byName = std::move(byName)](std::string_view ns, std::string_view name) -> std::optional<nlohmann::json> {
    auto it = byName.find(std::string(ns) + "/" + std::string(name));
    if (it == byName.end()) return std::nullopt;
    return it->second;
  };
}

int64_t nowSeconds() {
  return std::chrono::duration_cast<std::chrono::seconds>(std::chrono::system_clock::now().time_since_epoch()).count();
}

nlohmann::json itemWithKind(const nlohmann::json& item, const nlohmann::json& list) {
  const std::string kind = stringMember(list, "kind");
  if (!item.is_object() || item.contains("kind") || kind == "List" || !kind.ends_with("List")) return item;
  nlohmann::json out = item;
  out["kind"] = kind.substr(0, kind.size() - 4);
  return out;
}

int reviewFailed(const std::string& message) {
  std::cerr << "podshaper-webhook review: " << message << "\n";
  return 2;
}

int runReview(int argc, char** argv) {
  auto flags = cli::Flags::parse(argc, argv, 2, {"config", "output", "cluster", "filename", "namespace"}, {},
                                 {{"f", "filename"}, {"n", "namespace"}, {"o", "output"}});
  if (!flags) return reviewFailed(flags.error().message);
  if (flags->has("namespace") && !flags->has("filename")) return reviewFailed("--namespace goes with -f");
  const std::string output = flags->get("output", "review");
  if (!flags->has("filename") && output != "review" && output != "pod") {
    return reviewFailed("--output must be review or pod (yaml, json or diff with -f)");
  }
  auto config = loadConfig(flags->get("config"));
  if (!config) return reviewFailed(config.error().message);
  ClusterObjects cluster;
  if (auto path = flags->get("cluster")) {
    auto loaded = loadCluster(*path);
    if (!loaded) return reviewFailed(loaded.error().message);
    cluster = std::move(*loaded);
  }
  const bool clusterGiven = flags->has("cluster");
  if (flags->has("filename")) return reviewFiles(*flags, *config, std::move(cluster), clusterGiven);
  return reviewAdmission(*flags, *config, clusterGiven ? &cluster : nullptr);
}

}  // namespace podshaper::webhook
