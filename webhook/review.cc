#include "webhook/review.h"

#include <iostream>
#include <iterator>
#include <optional>
#include <vector>
#include <string>

#include <nlohmann/json.hpp>

#include "api/names.h"
#include "base/base64.h"
#include "base/json_util.h"
#include "cli/documents.h"
#include "cli/flags.h"
#include "shaping/admission.h"
#include "shaping/cluster_view.h"
#include "shaping/pod_claims.h"
#include "shaping/workload.h"
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

int fail(const std::string& message) {
  std::cerr << "podshaper-webhook review: " << message << "\n";
  return 2;
}

// The objects of a file: a List's items, each in its place.
std::vector<nlohmann::json> objectsOf(std::vector<nlohmann::json> documents) {
  std::vector<nlohmann::json> objects;
  for (auto& doc : documents) {
    if (stringMember(doc, "kind") == "List" && member(doc, "items").is_array()) {
      for (auto& item : doc["items"]) objects.push_back(std::move(item));
    } else {
      objects.push_back(std::move(doc));
    }
  }
  return objects;
}

// "Job ml/train spec.template" as a user finds it in the file.
std::string describe(const nlohmann::json& object, const std::string& namespaceName, const std::string& where) {
  std::string name = stringMember(member(object, "metadata"), "name");
  if (name.empty()) name = stringMember(member(object, "metadata"), "generateName");
  std::string kind = stringMember(object, "kind");
  std::string text = (kind.empty() ? "object" : kind) + " " + namespaceName + "/" + name;
  return where.empty() ? text : text + " " + where;
}

// -f: Pods and workloads in, each shaped as the pods they make would be; exit 1 on a denial.
int reviewFiles(const cli::Flags& flags, const Config& config, const LoadedCluster* cluster) {
  std::string path = *flags.get("filename");
  std::string text;
  if (path == "-") {
    text.assign(std::istreambuf_iterator<char>(std::cin), std::istreambuf_iterator<char>());
  } else {
    auto read = cli::readFile(path);
    if (!read) return fail(read.error().message);
    text = std::move(*read);
  }
  auto documents = cli::readDocuments(text);
  if (!documents) return fail((path == "-" ? "stdin" : path) + ": " + documents.error().message);
  std::string output = flags.get("output", cli::isJsonText(text) ? "json" : "yaml");
  if (output != "yaml" && output != "json") return fail("-f: --output must be yaml or json");

  std::vector<nlohmann::json> shaped;
  bool denied = false;
  std::size_t templates = 0;
  for (const auto& object : objectsOf(std::move(*documents))) {
    if (stringMember(object, "kind") == "AdmissionReview") {
      return fail("an AdmissionReview is read without -f, on stdin");
    }
    AdmissionContext context;
    context.namespaceName = stringMember(member(object, "metadata"), "namespace");
    if (context.namespaceName.empty()) context.namespaceName = flags.get("namespace", "default");
    context.cluster = cluster ? &cluster->view : nullptr;
    if (cluster) context.claims = cluster->claims;
    context.shaperVersion = kShaperVersion;
    WorkloadReview review = reviewWorkload(object, config, context);
    for (const auto& t : review.templates) {
      ++templates;
      std::string what = describe(object, context.namespaceName, t.where);
      if (!t.called) {
        std::cerr << "Note: " << what << ": not labelled " << names::kInjectLabel
                  << ": \"true\", so the API server does not call podshaper for "
                  << (t.where.empty() ? "it" : "the pods made from it") << "; left as written\n";
        continue;
      }
      for (const auto& w : t.warnings) std::cerr << "Warning: " << what << ": " << w << "\n";
      if (!t.allowed) {
        std::cerr << "Error: " << what << ": denied: " << t.message << "\n";
        denied = true;
      }
    }
    shaped.push_back(std::move(review.object));
  }
  if (templates == 0) std::cerr << "Note: no pod or pod template found: nothing for podshaper to shape\n";
  if (output == "json") {
    if (shaped.size() == 1) {
      std::cout << shaped.front().dump(2) << "\n";
    } else {
      std::cout << nlohmann::json{{"apiVersion", "v1"}, {"kind", "List"}, {"items", shaped}}.dump(2) << "\n";
    }
  } else {
    for (std::size_t i = 0; i < shaped.size(); ++i) {
      std::cout << (i ? "---\n" : "") << cli::toYaml(shaped[i]);
    }
  }
  return denied ? 1 : 0;
}

}  // namespace

int runReview(int argc, char** argv) {
  auto flags = cli::Flags::parse(argc, argv, 2, {"config", "output", "cluster", "filename", "namespace"}, {},
                                 {{"f", "filename"}, {"n", "namespace"}});
  if (!flags) return fail(flags.error().message);
  if (flags->has("namespace") && !flags->has("filename")) return fail("--namespace goes with -f");
  std::string output = flags->get("output", "review");
  if (!flags->has("filename") && output != "review" && output != "pod") {
    return fail("--output must be review or pod (yaml or json with -f)");
  }
  auto config = loadConfig(flags->get("config"));
  if (!config) return fail(config.error().message);
  std::optional<LoadedCluster> cluster;
  if (auto path = flags->get("cluster")) {
    auto loaded = loadCluster(*path);
    if (!loaded) return fail(loaded.error().message);
    cluster = std::move(*loaded);
  }
  if (flags->has("filename")) return reviewFiles(*flags, *config, cluster ? &*cluster : nullptr);
  std::string input{std::istreambuf_iterator<char>(std::cin), std::istreambuf_iterator<char>()};
  auto decision = admit(input, *config, cluster ? &cluster->view : nullptr, kShaperVersion,
                        cluster ? cluster->claims : ClaimLookup());
  if (!decision) return fail(decision.error().message);
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
  std::cout << shapedPod(input, response).dump(2) << "\n";
  return 0;
}

}  // namespace podshaper::webhook
