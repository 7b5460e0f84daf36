#include "shaping/request_limits.h"

#include <algorithm>

#include "api/names.h"
#include "base/json_diff.h"
#include "base/json_util.h"
#include "base/quantity.h"
#include "base/text.h"

#include <set>

namespace podshaper {
namespace {

using json = nlohmann::json;

constexpr std::string_view kDeprecatedUlimitPrefix = "ulimits.nri.containerd.io/container.";

// "262814 B (256.7 KiB)"
std::string bytesWords(std::size_t bytes) {
  std::string out = std::to_string(bytes) + " B";
  if (bytes < 10 * 1024) return out;
  const std::size_t tenths = (bytes * 10 + 512) / 1024;
  return out + " (" + std::to_string(tenths / 10) + "." + std::to_string(tenths % 10) + " KiB)";
}

// The annotations podshaper reads its inputs from.
bool isInput(std::string_view key) {
  for (std::string_view k : {names::kWorkers, names::kPrefetchFactor, names::kBatchBytes, names::kBatchShape,
                             names::kBatchDtype, names::kRanksPerPod, names::kNcclCommunicators, names::kPlacement}) {
    if (key == k) return true;
  }
  return false;
}

}  // namespace

std::size_t annotationsBytes(const json& object) {
  return bytesOfAnnotations(member(member(object, "metadata"), "annotations"));
}

std::size_t bytesOfAnnotations(const json& annotations) {
  if (!annotations.is_object()) return 0;
  std::size_t total = 0;
  for (auto it = annotations.begin(); it != annotations.end(); ++it) {
    total += it.key().size() + (it->is_string() ? it->get_ref<const std::string&>().size() : it->dump().size());
  }
  return total;
}

std::string limitWords(std::size_t bytes) {
  return formatBytes(static_cast<int64_t>(bytes)) + " (" + std::to_string(bytes) + " B)";
}

Result<void> checkPodSize(const json& pod) {
  const std::size_t total = annotationsBytes(pod);
  if (total > kApiAnnotationsLimit) {
    return makeError("metadata.annotations hold " + bytesWords(total) + " in all, above the API server's limit of " +
                     limitWords(kApiAnnotationsLimit) + ": it would refuse the pod; remove the annotations it does "
                     "not need");
  }
  const json& annotations = member(member(pod, "metadata"), "annotations");
  std::size_t ulimits = 0;
  for (auto it = annotations.begin(); annotations.is_object() && it != annotations.end(); ++it) {
    const std::size_t size = it->is_string() ? it->get_ref<const std::string&>().size() : 0;
    if (size > kMaxInputAnnotationBytes && isInput(it.key())) {
      return makeError("annotation " + cutUtf8(it.key(), 100) + " is " + bytesWords(size) + "; podshaper reads at " +
                       "most " + std::to_string(kMaxInputAnnotationBytes) + " B of its annotations (a count, a " +
                       "quantity, a shape such as 32x3x224x224)");
    }
    if (!it.key().starts_with(names::kUlimitAnnotationPrefix) && !it.key().starts_with(kDeprecatedUlimitPrefix)) {
      continue;
    }
    ulimits += size;
    if (size > kMaxUlimitAnnotationBytes) {
      return makeError("annotation " + cutUtf8(it.key(), 100) + " is " + bytesWords(size) + "; podshaper reads a " +
                       "ulimit list of at most " + limitWords(kMaxUlimitAnnotationBytes) + " to add RLIMIT_MEMLOCK " +
                       "to it: keep one entry per rlimit (- type: RLIMIT_NOFILE, soft: …, hard: …)");
    }
    if (ulimits > kMaxUlimitAnnotationBytes) {
      return makeError("the pod's NRI ulimit annotations (" + std::string(names::kUlimitAnnotationPrefix) +
                       "<name>) hold more than " + limitWords(kMaxUlimitAnnotationBytes) + " in all, what " +
                       "podshaper reads to add RLIMIT_MEMLOCK: keep one entry per rlimit in each");
    }
  }
  std::set<std::string_view> seen;
  for (const json& c : member(member(pod, "spec"), "containers")) {
    const json& name = member(c, "name");
    if (!name.is_string()) continue;
    const std::string& n = name.get_ref<const std::string&>();
    if (n.size() > kMaxContainerName) {
      return makeError("container name \"" + cutUtf8(n, 64) + "\" is " + std::to_string(n.size()) +
                       " bytes; the API server takes at most " + std::to_string(kMaxContainerName) + " (a DNS label)");
    }
    if (!seen.insert(n).second) {
      return makeError("two containers are named \"" + n + "\"; the API server refuses a pod whose containers share a " +
                       "name: give each its own");
    }
  }
  return {};
}

Result<void> checkNodeAffinitySize(const json& pod) {
  const json& terms = member(member(member(member(member(pod, "spec"), "affinity"), "nodeAffinity"),
                                    "requiredDuringSchedulingIgnoredDuringExecution"),
                             "nodeSelectorTerms");
  if (!terms.is_array()) return {};
  constexpr std::string_view field =
      "spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms";
  // The keys and values of every requirement: what copying a term copies.
  std::size_t bytes = 0;
  for (const json& term : terms) {
    for (const char* list : {"matchExpressions", "matchFields"}) {
      for (const json& r : member(term, list)) {
        if (const json& k = member(r, "key"); k.is_string()) bytes += k.get_ref<const std::string&>().size();
        for (const json& v : member(r, "values")) {
          if (v.is_string()) bytes += v.get_ref<const std::string&>().size();
        }
      }
    }
  }
  if (bytes > kMaxSelectorTermsBytes) {
    return makeError(std::string(field) + " hold " + bytesWords(bytes) +
                     " of keys and values; podshaper copies the terms to add its node requirements and takes at most " +
                     limitWords(kMaxSelectorTermsBytes) + ": merge terms and values");
  }
  if (terms.size() > kMaxSelectorTerms) {
    return makeError(std::string(field) + " has " + std::to_string(terms.size()) +
                     " terms; podshaper adds its node requirements to each and takes at most " +
                     std::to_string(kMaxSelectorTerms) + ": merge terms (a term's values list takes many values)");
  }
  for (std::size_t i = 0; i < terms.size(); ++i) {
    std::size_t requirements = 0;
    for (const char* list : {"matchExpressions", "matchFields"}) {
      if (const json& l = member(terms[i], list); l.is_array()) requirements += l.size();
    }
    if (requirements > kMaxTermRequirements) {
      return makeError(std::string(field) + "[" + std::to_string(i) + "] has " + std::to_string(requirements) +
                       " requirements; podshaper takes at most " + std::to_string(kMaxTermRequirements) +
                       " in a term it adds its node requirements to: merge them (one key, a values list)");
    }
  }
  return {};
}

Result<void> fitAnnotations(std::size_t beforeBytes, JsonEdit& shaped) {
  std::size_t total = annotationsBytes(shaped.document());
  if (total <= kApiAnnotationsLimit) return {};
  shaped.erase({"metadata", "annotations", names::kWarnings});
  total = annotationsBytes(shaped.document());
  if (total <= kApiAnnotationsLimit) return {};
  // What podshaper wrote: the annotations its patch adds or replaces (read from the patch
  // only here, on the way to a denial), largest first.
  const json& annotations = shaped.document().at("metadata").at("annotations");
  std::set<std::string> written;
  constexpr std::string_view kUnder = "/metadata/annotations";
  const std::string patch = shaped.patch();  // never empty here: podshaper's annotations are in it
  for (const json& op : patch.empty() ? json::array() : json::parse(patch)) {
    const std::string& path = op.at("path").get_ref<const std::string&>();
    if (op.at("op") == "remove" || !path.starts_with(kUnder)) continue;
    if (path.size() == kUnder.size()) {  // the whole object, made or replaced
      for (auto it = op.at("value").begin(); op.at("value").is_object() && it != op.at("value").end(); ++it) {
        written.insert(it.key());
      }
    } else if (path[kUnder.size()] == '/') {
      written.insert(unescapePointerToken(std::string_view(path).substr(kUnder.size() + 1)));
    }
  }
  std::vector<std::pair<std::size_t, std::string>> added;
  for (const std::string& key : written) {
    const json& value = member(annotations, key);
    if (value.is_null()) continue;  // written, then left out (the warnings)
    added.emplace_back(key.size() + (value.is_string() ? value.get_ref<const std::string&>().size() : 0), key);
  }
  std::sort(added.begin(), added.end(), std::greater<>());
  std::string what;
  for (std::size_t i = 0; i < added.size() && i < 3; ++i) {
    what += (i ? ", " : "") + added[i].second + " " + bytesWords(added[i].first);
  }
  if (added.size() > 3) what += " and " + std::to_string(added.size() - 3) + " more";
  return makeError("the annotations podshaper adds (" + what + ") would take metadata.annotations to " +
                   bytesWords(total) + ", above the API server's limit of " + limitWords(kApiAnnotationsLimit) +
                   ", which would refuse the pod; it has " + bytesWords(beforeBytes) +
                   " of its own: remove the annotations it does not need");
}

}  // namespace podshaper
