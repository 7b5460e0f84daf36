#include "fuzz/admission_checks.h"

#include <nlohmann/json.hpp>
#include <yaml-cpp/yaml.h>

#include <time.h>

#include <algorithm>
#include <cctype>
#include <optional>
#include <string>

#include "api/names.h"
#include "base/base64.h"
#include "base/json_util.h"
#include "base/quantity.h"
#include "fuzz/fuzz_check.h"
#include "shaping/admission.h"
#include "shaping/pod_shaper.h"
#include "shaping/request_limits.h"
#include "shaping/shm.h"

namespace podshaper::fuzz {
namespace {

using json = nlohmann::json;

constexpr std::string_view kVersion = "podshaper-webhook/fuzz";

Node node(const std::string& name, uint64_t gpus, const std::string& p2p, int64_t memory, bool validated) {
  Node n;
  n.name = name;
  n.allocatableGpus = gpus;
  n.memoryBytes = memory;
  n.labels = {{std::string(names::kHostnameLabel), name}};
  if (validated) {
    n.labels.set(std::string(names::kTopologyValidated), "true");
    n.labels.set(std::string(names::kGpuCount), std::to_string(gpus));
    n.labels.set(std::string(names::kP2P), p2p);
    n.labels.set(std::string(names::kMemlock), "unlimited");
  }
  return n;
}

std::string message(const json& j) { return show(j); }

// How many items the YAML text has as a sequence, and whether one sets memlock
// soft = hard = `rlimit` as the NRI ulimit-adjuster reads it; nullopt when it is
// not a sequence.
struct Ulimits {
  std::size_t items = 0;
  bool memlockAsked = false;
};
std::optional<Ulimits> readUlimits(const std::string& text, const std::string& rlimit) {
  try {
    YAML::Node list = YAML::Load(text);
    if (!list.IsSequence()) return std::nullopt;
    Ulimits u;
    for (const auto& item : list) {
      ++u.items;
      if (!item.IsMap() || !item["type"] || !item["type"].IsScalar()) continue;
      std::string type = item["type"].Scalar();
      std::transform(type.begin(), type.end(), type.begin(), [](unsigned char c) { return std::tolower(c); });
      const bool asked = item["soft"] && item["soft"].IsScalar() && item["hard"] && item["hard"].IsScalar() &&
                         item["soft"].Scalar() == rlimit && item["hard"].Scalar() == rlimit;
      if ((type == "rlimit_memlock" || type == "memlock") && asked) u.memlockAsked = true;
    }
    return u;
  } catch (const YAML::Exception&) {
    return std::nullopt;
  }
}

// An NRI ulimit annotation the webhook wrote or extended is a YAML list the
// plugin can read (else the container is not created), with the memlock the
// config asks and the user's own entries kept.
void checkUlimitAnnotations(const json& pod, const json& patched, const Config& config) {
  const std::string rlimit = config.node.memlock.rlimit();
  const json& before = member(member(pod, "metadata"), "annotations");
  for (const auto& [key, value] : patched.at("metadata").at("annotations").items()) {
    if (!key.starts_with(names::kUlimitAnnotationPrefix) && !key.starts_with("ulimits.nri.containerd.io/container.")) {
      continue;
    }
    const json& old = member(before, key);
    if (old == value) continue;
    FUZZ_CHECK(value.is_string(), key);
    auto now = readUlimits(value.get<std::string>(), rlimit);
    FUZZ_CHECK(now && now->memlockAsked, key + ": " + message(value));
    if (old.is_string()) {
      auto was = readUlimits(old.get<std::string>(), rlimit);
      FUZZ_CHECK(was && now->items == was->items + 1, key + ": " + message(old) + " became " + message(value));
    }
  }
}

}  // namespace

ClusterView fuzzCluster(bool validated) {
  ClusterView view;
  view.nodes = {node("h100-0", 8, "all", 2LL << 40, validated), node("a100-0", 8, "partial", 1LL << 40, validated),
                node("l40s-0", 4, "partial", 384LL << 30, validated)};
  const std::string enforce(names::kPodSecurityEnforce);
  view.namespaceLabels = {{"ml", {}},
                          {"default", {{enforce, "privileged"}}},
                          {"restricted", {{enforce, "restricted"}}},
                          {"baseline", {{enforce, "baseline"}}},
                          {"opted-out", {{std::string(names::kInjectLabel), "disabled"}}}};
  return view;
}

const std::vector<Setting>& fuzzSettings() {
  static const ClusterView validated = fuzzCluster(true);
  static const ClusterView unvalidated = fuzzCluster(false);
  static const std::vector<Setting> settings = [] {
    Config other;
    other.node.partialNode = PartialNodePolicy::kExpand;
    other.podSecurity = PodSecurityAction::kWarn;
    other.node.nodeMemory = 512LL << 30;
    other.shm.headroomPercent = 0;
    other.shm.ncclShmPerCommunicator = {1, 2, 3};
    Config warn;
    warn.node.partialNode = PartialNodePolicy::kWarn;
    warn.podDefaults.ncclCommunicators = 0;
    warn.node.memlock = MemlockLimit{4 << 20};
    return std::vector<Setting>{{Config{}, &validated}, {warn, nullptr}, {other, &unvalidated}};
  }();
  return settings;
}

double threadCpuSeconds() {
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) / 1e9;
}

void checkAdmission(std::string_view body, const Config& config, const ClusterView* cluster) {
  // CPU bounded: an admission costs a bounded number of parses of its own body
  // (bench/admission_cost measures the real ratio, about 3; this allows for sanitizers).
  AdmissionScratch scratch;  // as a webhook thread keeps it between reviews
  double start = threadCpuSeconds();
  auto decision = admit(scratch, body, config, cluster, kVersion);
  double admitted = threadCpuSeconds();
  const json reread = json::parse(body, nullptr, /*allow_exceptions=*/false);
  const double parse = threadCpuSeconds() - admitted;
  if (admitted - start > 40 * parse + 0.1) {
    // Once more before failing: a cost that grows with the input is there again; a pause
    // of the thread's own (the sanitizer's allocator recycling its quarantine, page
    // faults) is not.
    start = threadCpuSeconds();
    decision = admit(scratch, body, config, cluster, kVersion);
    admitted = threadCpuSeconds();
  }
  FUZZ_CHECK(admitted - start <= 40 * parse + 0.1,
             "admission took " + std::to_string((admitted - start) * 1000) + " ms of CPU, parsing its body " +
                 std::to_string(parse * 1000) + " ms");
  if (!decision) {
    const std::string& m = decision.error().message;
    FUZZ_CHECK(m.starts_with("not an AdmissionReview"), m);
    return;
  }
  const json& in = reread;
  FUZZ_CHECK(!in.is_discarded(), "admit() accepted a body that does not parse");
  // The same review again reads into the tree the first one left, shaped: the same answer.
  auto twice = admit(scratch, body, config, cluster, kVersion);
  FUZZ_CHECK(twice.ok() && twice->body() == decision->body(), "the same review answered twice differs");
  const json& review = decision->review;
  // The server sends exactly this: it must serialize (no invalid UTF-8).
  std::string sent;
  try {
    sent = review.dump();
  } catch (const json::exception& e) {
    fail(__FILE__, __LINE__, "review.dump() throws", e.what());
  }
  FUZZ_CHECK(decision->body() == sent, "the answer's bytes are not review.dump(): " + decision->body());
  // What podshaper writes grows with the body, not with what the body asks.
  FUZZ_CHECK(sent.size() <= 8 * body.size() + 64 * 1024,
             "a " + std::to_string(body.size()) + " B review got a " + std::to_string(sent.size()) + " B response");
  FUZZ_CHECK(review.value("kind", "") == "AdmissionReview", message(review));
  FUZZ_CHECK(review.value("apiVersion", "") == "admission.k8s.io/v1", message(review));
  const json& response = review.at("response");
  FUZZ_CHECK(response.at("uid") == in.at("request").at("uid"), message(response));
  FUZZ_CHECK(response.at("allowed").is_boolean() && response.at("allowed").get<bool>() == decision->allowed,
             message(response));
  FUZZ_CHECK(decision->mutated == response.contains("patch"), message(response));
  if (response.contains("warnings")) {
    FUZZ_CHECK(response["warnings"].is_array(), message(response));
    for (const json& w : response["warnings"]) {
      FUZZ_CHECK(w.is_string() && w.get<std::string>().starts_with("podshaper: "), message(w));
    }
  }
  if (!decision->allowed) {
    FUZZ_CHECK(!decision->mutated, "a denial carries a patch");
    const json& status = response.at("status");
    FUZZ_CHECK(status.value("code", 0) == 403, message(status));
    FUZZ_CHECK(status.value("message", "").starts_with("podshaper: "), message(status));
    // Words, never a library's exception text (unless the input itself holds that text,
    // which a denial may quote back: an annotation's value).
    FUZZ_CHECK(status.value("message", "").find("json.exception") == std::string::npos ||
                   body.find("json.exception") != std::string_view::npos,
               message(status));
    return;
  }
  if (!decision->mutated) return;

  FUZZ_CHECK(response.value("patchType", "") == "JSONPatch", message(response));
  auto raw = base64Decode(response.at("patch").get<std::string>());
  FUZZ_CHECK(raw.ok(), "the patch is not base64");
  json patch = json::parse(*raw, nullptr, /*allow_exceptions=*/false);
  FUZZ_CHECK(!patch.is_discarded() && patch.is_array() && !patch.empty(), *raw);
  const json& request = in.at("request");
  const json& pod = request.at("object");
  json patched;
  try {
    patched = pod.patch(patch);
  } catch (const json::exception& e) {
    fail(__FILE__, __LINE__, "the patch does not apply to the pod", std::string(e.what()) + "\npatch: " + *raw);
  }

  // The patch gives exactly the shaped pod (JsonEdit's operations and the escaping of keys hold).
  AdmissionContext context;
  context.namespaceName = request.contains("namespace") && request["namespace"].is_string()
                              ? request["namespace"].get<std::string>()
                              : "";
  context.cluster = cluster;
  context.shaperVersion = std::string(kVersion);
  ShapeOutcome outcome = shapePod(pod, config, context);
  FUZZ_CHECK(outcome.allowed, outcome.message);
  FUZZ_CHECK(outcome.pod == patched, "patched pod differs from the shaped pod: " +
                                         message(json::diff(outcome.pod, patched)));
  const json& annotations = patched.at("metadata").at("annotations");
  FUZZ_CHECK(annotations.contains(std::string(names::kShapedBy)), message(annotations));
  // The API server checks its annotation limit after the mutating webhooks: a pod
  // podshaper allows is never refused for what podshaper added.
  FUZZ_CHECK(annotationsBytes(patched) <= kApiAnnotationsLimit,
             std::to_string(annotationsBytes(patched)) + " B of annotations after the patch");
  // Every shaped pod keeps its formula. A /dev/shm podshaper adds is never below the
  // runtime's default 64Mi and is what shm-size says; where GPU containers keep volumes of
  // their own, shm-size is a kept sizeLimit as written, or absent (docs/webhook.md "A
  // /dev/shm of the user's").
  FUZZ_CHECK(annotations.contains(std::string(names::kShmFormula)), message(annotations));
  auto shmVolumes = [](const json& p) {
    const json& volumes = member(member(p, "spec"), "volumes");
    if (!volumes.is_array()) return std::ptrdiff_t{0};
    return std::count_if(volumes.begin(), volumes.end(),
                         [](const json& v) { return hasText(member(v, "name"), names::kShmVolume); });
  };
  if (shmVolumes(patched) > shmVolumes(pod)) {
    const json& shmSize = annotations.at(std::string(names::kShmSize));
    auto shm = parseQuantity(shmSize.is_string() ? shmSize.get<std::string>() : "");
    FUZZ_CHECK(shm.ok() && *shm >= static_cast<int64_t>(kMinShmBytes), message(annotations));
  } else if (annotations.contains(std::string(names::kShmSize))) {
    FUZZ_CHECK(annotations[std::string(names::kShmSize)].is_string(), message(annotations));
  }

  checkUlimitAnnotations(pod, patched, config);

  // Idempotence: the API server stores the patched pod; a reinvocation (or a
  // second webhook call) must leave it alone.
  json again = in;
  again["request"]["object"] = patched;
  auto second = admit(again.dump(), config, cluster, kVersion);
  FUZZ_CHECK(second.ok(), second.ok() ? "" : second.error().message);
  FUZZ_CHECK(second->allowed, message(second->review));
  FUZZ_CHECK(!second->mutated, "a second admission patched again: " + message(second->review));
}

}  // namespace podshaper::fuzz
