// review -f: the objects users already have, each workload shaped as the pods it makes
// would be, printed back as read where podshaper changes nothing.
#include <algorithm>
#include <filesystem>
#include <iostream>
#include <iterator>
#include <map>
#include <set>
#include <optional>
#include <string>
#include <vector>

#include "api/dra.h"
#include "api/names.h"
#include "base/json_util.h"
#include "cli/diff.h"
#include "cli/documents.h"
#include "shaping/cluster_view.h"
#include "shaping/pod_claims.h"
#include "shaping/train_job.h"
#include "shaping/workload.h"
#include "webhook/config_file.h"
#include "webhook/review.h"

namespace podshaper::webhook {
namespace {

using json = nlohmann::json;

// One file of the input ("-": stdin) and its documents.
struct Input {
  std::string name;
  std::string text;
  std::vector<cli::Document> documents;
};

// FILE, every .yaml, .yml and .json of DIR (not below it, as kubectl -f without -R), or stdin.
Result<void> readInput(const std::string& path, std::vector<Input>& inputs) {
  if (path == "-") {
    std::string text(std::istreambuf_iterator<char>(std::cin), std::istreambuf_iterator<char>{});
    inputs.push_back({"stdin", std::move(text), {}});
  } else if (std::error_code ec; std::filesystem::is_directory(path, ec)) {
    std::vector<std::string> files;
    for (const auto& entry : std::filesystem::directory_iterator(path, ec)) {
      const std::string ext = entry.path().extension().string();
      if (entry.is_regular_file() && (ext == ".yaml" || ext == ".yml" || ext == ".json")) files.push_back(entry.path());
    }
    if (ec) return makeError(path + ": " + ec.message());
    if (files.empty()) return makeError(path + ": no .yaml, .yml or .json file in this folder");
    std::sort(files.begin(), files.end());
    for (const auto& f : files) {
      auto text = cli::readFile(f);
      if (!text) return text.error();
      inputs.push_back({f, std::move(*text), {}});
    }
  } else {
    auto text = cli::readFile(path);
    if (!text) return text.error();
    inputs.push_back({path, std::move(*text), {}});
  }
  return {};
}

// Each -f in turn.
Result<std::vector<Input>> readInputs(const std::vector<std::string>& paths) {
  std::vector<Input> inputs;
  for (const auto& path : paths) {
    if (path == "-" && std::count(paths.begin(), paths.end(), "-") > 1) return makeError("-f - (stdin) is given twice");
    if (auto read = readInput(path, inputs); !read) return read.error();
  }
  for (Input& in : inputs) {
    if (in.text.starts_with("\xEF\xBB\xBF")) in.text.erase(0, 3);  // a byte order mark, not text
    auto documents = cli::readDocumentsAsWritten(in.text);
    if (!documents) return makeError(in.name + ": " + documents.error().message);
    in.documents = std::move(*documents);
  }
  return inputs;
}

// The objects of a document: a list's items (a List, a NodeList, any kind ending in List,
// as kubectl and the API server write them), else the document.
std::vector<json*> objectsOf(json& document) {
  std::vector<json*> objects;
  const std::string kind = stringMember(document, "kind");
  if (kind.ends_with("List") && member(document, "items").is_array()) {
    for (json& item : document["items"]) objects.push_back(&item);
  } else {
    objects.push_back(&document);
  }
  return objects;
}

// The kind as a user tells it apart: with its group where Kubernetes has a kind of that
// name in another group ("Job.batch.volcano.sh", not "Job").
std::string kindWords(const json& object) {
  static const std::map<std::string, std::string, std::less<>> kBuiltIn = {
      {"Pod", ""},         {"PodTemplate", ""},       {"ReplicationController", ""}, {"Job", "batch"},
      {"CronJob", "batch"}, {"Deployment", "apps"}, {"StatefulSet", "apps"},       {"ReplicaSet", "apps"},
      {"DaemonSet", "apps"}};
  const std::string kind = stringMember(object, "kind");
  if (kind.empty()) return "object";
  const std::string apiVersion = stringMember(object, "apiVersion");
  const auto slash = apiVersion.find('/');
  const std::string group = slash == std::string::npos ? "" : apiVersion.substr(0, slash);
  auto builtIn = kBuiltIn.find(kind);
  return builtIn != kBuiltIn.end() && !group.empty() && builtIn->second != group ? kind + "." + group : kind;
}

// "JobSet ml/train", "JobSet ml/ag-2-* (generateName)" as a user finds it in the file.
std::string describe(const json& object, const std::string& namespaceName, const std::string& where = "") {
  const json& meta = member(object, "metadata");
  std::string name = stringMember(meta, "name");
  if (name.empty() && !stringMember(meta, "generateName").empty()) {
    name = stringMember(meta, "generateName") + "* (generateName)";
  }
  if (name.empty()) name = "(no name)";
  // A cluster-scoped kind has no namespace to name.
  static const std::set<std::string, std::less<>> kClusterScoped = {
      "ClusterTrainingRuntime", "ClusterQueue", "ClusterRole", "ClusterRoleBinding", "CustomResourceDefinition",
      "DeviceClass", "Namespace", "Node", "PriorityClass", "ResourceFlavor", "StorageClass"};
  const bool clusterScoped = kClusterScoped.contains(stringMember(object, "kind"));
  std::string text = kindWords(object) + " " + (clusterScoped ? "" : namespaceName + "/") + name;
  return where.empty() ? text : text + " " + where;
}

// The namespace the object's pods are made in: its own, else -n's, else "default".
std::string namespaceOf(const json& object, const cli::Flags& flags) {
  std::string ns = stringMember(member(object, "metadata"), "namespace");
  return ns.empty() ? flags.get("namespace", "default") : ns;
}

// What to do after a denial that review's own input decides.
std::string offlineAdvice(const TemplateReview& t, bool nodesKnown) {
  if (t.cause == DenialCause::kNodeSize && !nodesKnown && t.message.find("defaults.gpusPerNode") != std::string::npos) {
    return "; review was given no Node, so the node size came from its config: pass the cluster's Nodes with "
           "--cluster (kubectl get namespaces,nodes -o json > cluster.json) or in -f's input, or set "
           "defaults.gpusPerNode in --config";
  }
  if (t.cause == DenialCause::kClaims && t.message.find("was not found") != std::string::npos) {
    return "; review reads ResourceClaimTemplates and ResourceClaims (and a ComputeDomain, as the channel "
           "template its driver makes) from -f's input and --cluster: pass it there";
  }
  return "";
}

class Review {
 public:
  Review(const cli::Flags& flags, const Config& config, ClusterObjects cluster, bool clusterGiven,
         const std::vector<json*>& all)
      : flags_(flags), config_(config), all_(all) {
    nodesKnown_ = clusterGiven || !cluster.nodes.empty();
    if (nodesKnown_ || !cluster.namespaces.empty()) {
      view_ = buildClusterView(cluster.namespaces, cluster.nodes);
      view_->nodesKnown = nodesKnown_;  // Namespaces alone: their labels, and the node size from config
    }
    claims_ = cluster.claimLookup(config);
    // As with Nodes: --cluster's list is the cluster's, so a profile it lacks is none; without
    // it and without any ShmProfile in the input, the profiles are unknown, and not read.
    if (clusterGiven || !cluster.shmProfiles.empty()) shmProfiles_ = shmProfileLookupOver(cluster.shmProfiles);
  }

  // Shapes `object` where it lies; says on stderr what podshaper would tell.
  void object(json& object) {
    const std::string ns = namespaceOf(object, flags_);
    if (isTrainJob(object)) return trainJob(object, ns);
    if (isRuntimeKind(object)) return trainingRuntime(object, ns);
    WorkloadReview review = reviewWorkload(object, config_, context(ns));
    report(review, describe(object, ns));
    object = std::move(review.object);
  }

  bool denied() const { return denied_; }
  std::size_t templates() const { return templates_; }

 private:
  AdmissionContext context(const std::string& ns) const {
    AdmissionContext context;
    context.namespaceName = ns;
    context.cluster = view_ ? &*view_ : nullptr;
    context.claims = claims_;
    context.shmProfiles = shmProfiles_;
    context.now = now_;
    context.shaperVersion = kShaperVersion;
    return context;
  }

  static bool isRuntimeKind(const json& object) {
    const std::string kind = stringMember(object, "kind");
    return stringMember(object, "apiVersion").starts_with("trainer.kubeflow.org/") &&
           (kind == "ClusterTrainingRuntime" || kind == "TrainingRuntime");
  }

  void report(const WorkloadReview& review, const std::string& what) {
    for (const auto& t : review.templates) {
      ++templates_;
      const std::string where = t.where.empty() ? what : what + " " + t.where;
      if (!t.called) {
        std::cerr << "Note: " << where << ": not labelled " << names::kInjectLabel
                  << ": \"true\", so the API server does not call podshaper for "
                  << (t.where.empty() ? "it" : "the pods made from it") << "; left as written\n";
        continue;
      }
      for (const auto& w : t.warnings) std::cerr << "Warning: " << where << ": " << w << "\n";
      if (!t.allowed) {
        std::cerr << "Error: " << where << ": denied: " << t.message << offlineAdvice(t, nodesKnown_) << "\n";
        denied_ = true;
      }
    }
  }

  // A training runtime makes pods only through the TrainJobs that name it, with their
  // overrides: it is reviewed through them, and printed as written.
  void trainingRuntime(const json& runtime, const std::string& ns) {
    ++templates_;
    for (const json* o : all_) {
      auto ref = isTrainJob(*o) ? runtimeRefOf(*o) : std::nullopt;
      if (ref && isRuntime(runtime, *ref, namespaceOf(*o, flags_))) return;  // told with that TrainJob
    }
    std::cerr << "Note: " << describe(runtime, ns) << ": its pods are made for the TrainJobs that name it, with "
              << "their overrides (numNodes, resourcesPerNode): add such a TrainJob to the input to review them; "
              << "printed as written\n";
  }

  // A TrainJob: its pods come from its runtime, reviewed with its overrides when the
  // runtime is in the input. The TrainJob itself is printed as written.
  void trainJob(const json& job, const std::string& ns) {
    ++templates_;
    const std::string what = describe(job, ns);
    auto ref = runtimeRefOf(job);
    if (!ref) {
      std::cerr << "Note: " << what << ": spec.runtimeRef names no runtime: the Trainer controller makes no pod "
                << "from it\n";
      return;
    }
    const std::string runtimeWords = ref->kind + " \"" + ref->name + "\"";
    const json* runtime = nullptr;
    for (const json* o : all_) {
      if (isRuntime(*o, *ref, ns)) runtime = o;
    }
    if (runtime == nullptr) {
      std::cerr << "Note: " << what << ": its pods come from " << runtimeWords << " (spec.runtimeRef), which is not "
                << "in the input: add it (kubectl get "
                << (ref->kind == "TrainingRuntime" ? "trainingruntime -n " + ns : "clustertrainingruntime")
                << " " << ref->name << " -o yaml) to review them. podshaper is called for them when the runtime's pod "
                << "template (spec.template.spec.replicatedJobs[].template.spec.template) is labelled "
                << names::kInjectLabel << ": \"true\"; podshaper's annotations go in that template's metadata too\n";
      return;
    }
    TrainJobRuntime effective = runtimeForTrainJob(*runtime, job);
    std::string applied;
    for (const auto& a : effective.applied) applied += (applied.empty() ? "" : ", ") + a;
    std::cerr << "Note: " << what << ": its pods come from " << runtimeWords << " (spec.runtimeRef), reviewed "
              << (applied.empty() ? std::string("as the runtime has them") : "with the TrainJob's " + applied) << "\n";
    for (const auto& n : effective.notApplied) {
      std::cerr << "Warning: " << what << ": " << n << " not applied: review shapes the runtime's templates "
                << "without it\n";
    }
    --templates_;
    WorkloadReview review = reviewWorkload(effective.runtime, config_, context(ns));
    report(review, what + " from " + runtimeWords);
    // The runtime is printed as written: what its pods would get is told here.
    for (const auto& t : review.templates) {
      if (!t.called || !t.allowed) continue;
      const json& shaped = review.object.at(t.pointer);
      const std::string size = stringMember(member(member(shaped, "metadata"), "annotations"), names::kShmSize);
      const std::string formula = stringMember(member(member(shaped, "metadata"), "annotations"), names::kShmFormula);
      std::cerr << "Note: " << what << " from " << runtimeWords << " " << t.where << ": its pods get "
                << (size.empty() ? std::string("the /dev/shm the template mounts") : "a /dev/shm of " + size)
                << (formula.empty() ? "" : " (" + formula + ")") << "\n";
    }
  }

  const cli::Flags& flags_;
  const Config& config_;
  const std::vector<json*>& all_;
  std::optional<ClusterView> view_;
  ClaimLookup claims_;
  ShmProfileLookup shmProfiles_;
  int64_t now_ = nowSeconds();
  bool nodesKnown_ = false;
  bool denied_ = false;
  std::size_t templates_ = 0;
};

// The comments (and "---") a YAML document's text starts with, kept above it when it is
// written anew.
std::string leadingComments(const std::string& text) {
  std::size_t end = 0;
  while (end < text.size()) {
    std::size_t next = text.find('\n', end);
    next = next == std::string::npos ? text.size() : next + 1;
    std::string_view line(text.data() + end, next - end);
    const auto first = line.find_first_not_of(" \t\r\n");
    const bool marker = line.starts_with("---") && (first == std::string_view::npos || line.size() == 4 ||
                                                    line.find_first_not_of(" \t\r\n", 3) == std::string_view::npos ||
                                                    line[line.find_first_not_of(" \t", 3)] == '#');
    if (!marker && first != std::string_view::npos && line[first] != '#') break;
    end = next;
  }
  return text.substr(0, end);
}

// `written` with the input's line ends: CRLF where the input has them.
std::string crlfAsIn(const std::string& input, const std::string& written) {
  if (input.find("\r\n") == std::string::npos) return written;
  std::string out;
  for (char c : written) {
    if (c == '\n') out += '\r';
    out += c;
  }
  return out;
}

// YAML documents as one stream, "---" between them where a document's own text has none.
std::string joinYaml(const std::vector<std::string>& documents) {
  std::string out;
  for (std::size_t i = 0; i < documents.size(); ++i) {
    if (!out.empty() && out.back() != '\n') out += '\n';
    // A document's own text may start with its "---", or a directive ("%YAML") before it.
    const bool marked = documents[i].starts_with("---") || documents[i].starts_with("%");
    out += (i == 0 || marked ? "" : "---\n") + documents[i];
  }
  return out;
}

std::string indented(const std::string& text, std::size_t by) {
  std::string out;
  std::size_t start = 0;
  while (start < text.size()) {
    std::size_t end = text.find('\n', start);
    end = end == std::string::npos ? text.size() : end + 1;
    if (start > 0) out += std::string(by, ' ');
    out.append(text, start, end - start);
    start = end;
  }
  return out;
}

}  // namespace

int reviewFiles(const cli::Flags& flags, const Config& config, ClusterObjects cluster, bool clusterGiven) {
  auto inputs = readInputs(flags.getAll("filename"));
  if (!inputs) return reviewFailed(inputs.error().message);
  const std::string output = flags.get("output", cli::isJsonText(inputs->front().text) ? "json" : "yaml");
  if (output != "yaml" && output != "json" && output != "diff") {
    return reviewFailed("-f: --output must be yaml, json or diff");
  }

  // Every object of every document, the cluster's among them.
  std::vector<json*> all;
  std::vector<json> read;  // each document's value as read
  std::vector<json*> workloads;
  for (Input& in : *inputs) {
    std::size_t n = 0;
    for (cli::Document& doc : in.documents) {
      ++n;
      read.push_back(doc.value);
      for (json* o : objectsOf(doc.value)) {
        if (!o->is_object()) {
          return reviewFailed(in.name + ": document " + std::to_string(n) + " is not a Kubernetes object (" +
                              (o->is_array() ? "a list" : "a " + std::string(o->type_name())) + ")");
        }
        if (stringMember(*o, "kind") == "AdmissionReview") {
          return reviewFailed("an AdmissionReview is read without -f, on stdin");
        }
        all.push_back(o);
        // A claim, a ComputeDomain or a ShmProfile that names no namespace is in the one its
        // pods are (-n's), as kubectl would create it.
        json object = itemWithKind(*o, doc.value);
        const std::string kind = stringMember(object, "kind");
        if (stringMember(member(object, "metadata"), "namespace").empty() &&
            (kind.starts_with("ResourceClaim") || isComputeDomain(object) || kind == names::kShmProfileKind)) {
          object["metadata"]["namespace"] = namespaceOf(object, flags);
        }
        if (kind == names::kShmProfileKind && stringMember(member(object, "metadata"), "name").empty()) {
          std::cerr << "Warning: " << describe(object, namespaceOf(object, flags))
                    << ": not read: a ShmProfile is found by its name, the workload's\n";
        }
        if (!cluster.take(object)) workloads.push_back(o);
      }
    }
  }
  Review review(flags, config, std::move(cluster), clusterGiven, all);
  for (json* o : workloads) review.object(*o);
  if (review.templates() == 0) std::cerr << "Note: no pod or pod template found: nothing for podshaper to shape\n";

  std::size_t index = 0;
  std::vector<std::string> printed;  // each document as printed
  for (const Input& in : *inputs) {
    const bool jsonIn = cli::isJsonText(in.text);
    const bool json = output == "json" || (output == "diff" && jsonIn);
    std::vector<std::string> file;  // this file's documents as printed
    for (const cli::Document& doc : in.documents) {
      const bool asRead = doc.value == read[index++] && !doc.text.empty() && json == jsonIn;
      file.push_back(asRead ? doc.text
                     : json ? crlfAsIn(in.text, cli::toJson(doc.value, doc.layout))
                            : leadingComments(doc.text) + crlfAsIn(in.text, cli::toYaml(doc.value, doc.layout)));
    }
    // -o diff: each file against what it would be, so that `patch` applies it.
    if (output == "diff") {
      std::cout << cli::unifiedDiff(in.text, joinYaml(file), in.name + "\t(as written)",
                                    in.name + "\t(shaped by podshaper)");
    }
    printed.insert(printed.end(), file.begin(), file.end());
  }
  if (output == "yaml") {
    std::cout << joinYaml(printed);
  } else if (output == "json") {
    if (printed.size() == 1) {
      std::cout << printed.front();
    } else {
      std::cout << "{\n  \"apiVersion\": \"v1\",\n  \"kind\": \"List\",\n  \"items\": [\n";
      for (std::size_t i = 0; i < printed.size(); ++i) {
        std::string item = printed[i];
        while (!item.empty() && (item.back() == '\n' || item.back() == ' ')) item.pop_back();
        std::cout << "    " << indented(item, 4) << (i + 1 < printed.size() ? ",\n" : "\n");
      }
      std::cout << "  ]\n}\n";
    }
  }
  return review.denied() ? 1 : 0;
}

}  // namespace podshaper::webhook
