#include "shaping/pod_inputs.h"

#include "api/names.h"
#include "api/shm_volume.h"
#include "base/json_util.h"
#include "base/checked.h"
#include "base/quantity.h"
#include "base/text.h"
#include "shaping/request_limits.h"

#include <optional>
#include <set>

namespace podshaper {
namespace {

using json = nlohmann::json;

const json* memberPtr(const json& object, std::string_view key) {
  if (!object.is_object()) return nullptr;
  auto it = object.find(key);
  return it == object.end() ? nullptr : &*it;
}

Error annotationError(std::string_view key, const std::string& why, std::string_view hint) {
  return makeError("annotation " + std::string(key) + ": " + why + "; " + std::string(hint));
}

// A count annotation's value, and the warning that says its default was used.
struct Count {
  uint64_t value = 0;
  std::optional<std::string> warning;
};

// A count annotation, its default (with a warning saying so) and its lower bound.
Result<Count> countAnnotation(const json& pod, std::string_view key, uint64_t fallback, std::string_view fallbackFrom,
                              uint64_t min, std::string_view hint) {
  auto text = annotation(pod, key);
  if (!text) {
    return Count{fallback, std::string(key) + " not set: using " + std::to_string(fallback) + " from " +
                               std::string(fallbackFrom)};
  }
  auto value = parseCount(*text);
  if (!value) return annotationError(key, value.error().message, hint);
  if (*value < min) {
    return annotationError(key, inQuotes(*text) + " must be at least " + std::to_string(min), hint);
  }
  return Count{*value, std::nullopt};
}

// nvidia.com/gpu of a container: limits (where the device plugin requires it), else requests.
Result<uint64_t> containerGpus(const json& container, const std::string& name) {
  const json* resources = memberPtr(container, "resources");
  for (const char* field : {"limits", "requests"}) {
    const json* list = resources ? memberPtr(*resources, field) : nullptr;
    const json* gpus = list ? memberPtr(*list, names::kGpuResource) : nullptr;
    if (gpus == nullptr) continue;
    std::string text = gpus->is_string() ? gpus->get<std::string>() : gpus->dump();
    auto value = parseCount(text);
    if (!value) {
      return makeError("container " + inQuotes(name) + ": resources." + field + "[" +
                       std::string(names::kGpuResource) + "] " + value.error().message);
    }
    return *value;
  }
  return uint64_t{0};
}

// A securityContext field of the container, else of the pod (the container's wins).
const json* securityField(const json* podSecurity, const json& container, std::string_view key) {
  const json* own = memberPtr(container, "securityContext");
  if (const json* v = own ? memberPtr(*own, key) : nullptr; v != nullptr && !v->is_null()) return v;
  return podSecurity ? memberPtr(*podSecurity, key) : nullptr;
}

// A batch's size, and the warning about its dtype annotation, if any.
struct Batch {
  BatchSize size;
  std::optional<std::string> warning;
};

// With 0 workers a batch is only checked: the dtype's default is moot, and not warned.
Result<Batch> readBatch(const json& pod, uint64_t workers) {
  auto bytes = annotation(pod, names::kBatchBytes);
  auto shape = annotation(pod, names::kBatchShape);
  auto dtype = annotation(pod, names::kBatchDtype);
  const std::string both = "set " + std::string(names::kBatchBytes) + " (e.g. 18Mi) or " +
                           std::string(names::kBatchShape) + " with " +
                           std::string(names::kBatchDtype) + " (e.g. 32x3x224x224 and float32)";
  if (bytes && shape) {
    return makeError("annotations " + std::string(names::kBatchBytes) + " and " +
                     std::string(names::kBatchShape) + " are both set; keep only one");
  }
  if (bytes) {
    auto value = parseQuantity(*bytes);
    if (!value) return annotationError(names::kBatchBytes, value.error().message, both);
    if (*value == 0) return annotationError(names::kBatchBytes, inQuotes(*bytes) + " is zero", both);
    Batch batch{BatchSize{static_cast<uint64_t>(*value), "batch-bytes " + *bytes}, std::nullopt};
    if (dtype) {
      batch.warning =
          std::string(names::kBatchDtype) + " ignored: it applies only with " + std::string(names::kBatchShape);
    }
    return batch;
  }
  if (shape) {
    std::string d = dtype.value_or("float32");
    auto value = shapeBytes(*shape, d);
    if (!value) {
      bool dtypeWrong = !dtypeBytes(d).ok();
      return annotationError(dtypeWrong ? names::kBatchDtype : names::kBatchShape,
                             value.error().message, both);
    }
    Batch batch{BatchSize{*value, *shape + " " + d}, std::nullopt};
    if (!dtype && workers > 0) batch.warning = std::string(names::kBatchDtype) + " not set: using float32";
    return batch;
  }
  return makeError("the pod does not say how large a DataLoader batch is: " + both);
}

// The containers that hold GPUs (nvidia.com/gpu, or the requests of the pod's resource
// claims they use), with the pod's GPUs, job span and NCCL env from them.
Result<void> readGpuContainers(const json& spec, const json& containers, const PodClaimGpus& claims, PodInputs& in) {
  const json* podSecurity = memberPtr(spec, "securityContext");
  std::set<std::string> taken;  // claim requests counted by a container already
  std::vector<std::string> allRequests;  // the containers using a request of allocationMode All
  for (std::size_t i = 0; i < containers.size(); ++i) {
    const json& c = containers[i];
    std::string name = stringMember(c, "name");
    auto gpus = containerGpus(c, name);
    if (!gpus) return gpus.error();
    auto fromClaims = containerClaimGpus(c, claims, taken);
    if (!fromClaims) return makeError("container " + inQuotes(name) + ": " + fromClaims.error().message);
    for (const std::string& shared : fromClaims->shared) {
      in.warnings.push_back("container " + inQuotes(name) + " uses the GPUs of " + shared +
                            ", counted for an earlier container: it gets no /dev/shm, memory or ranks for them");
    }
    if (*gpus == 0 && !fromClaims->counted) continue;
    if (in.gpuContainers.size() == kMaxGpuContainers) {
      return makeError("container " + inQuotes(name) + " is GPU container " + std::to_string(kMaxGpuContainers + 1) +
                       " of the pod; podshaper shapes at most " + std::to_string(kMaxGpuContainers) +
                       " (each holds a GPU of the one node the pod runs on): put the GPUs in fewer containers");
    }
    if (fromClaims->counted) in.gpusFromClaims = true;
    if (fromClaims->all) allRequests.push_back(name);
    // A wrapped sum read as a small pod (0 GPUs: 0 ranks, a 0-byte /dev/shm).
    auto podGpus = checkedAdd(in.podGpus, *gpus);
    if (!podGpus) {
      return makeError("container " + inQuotes(name) + ": " + std::string(names::kGpuResource) + " " +
                       std::to_string(*gpus) + " takes the pod's GPUs past 64 bits");
    }
    auto own = checkedAdd(*gpus, fromClaims->count);
    podGpus = own ? checkedAdd(*podGpus, fromClaims->count) : std::nullopt;
    if (!podGpus) return makeError("container " + inQuotes(name) + ": its GPUs take the pod's GPUs past 64 bits");
    const json* user = securityField(podSecurity, c, "runAsUser");
    const json* nonRoot = securityField(podSecurity, c, "runAsNonRoot");
    in.span = in.gpuContainers.empty() ? readJobSpan(c, name) : combineJobSpans(in.span, readJobSpan(c, name));
    in.ncclEnv = combineNcclEnvs(in.ncclEnv, readNcclEnv(c, name));
    in.gpuContainers.push_back(GpuContainer{
        i, name, *own, fromClaims->all, shmMountOf(c),
        user && user->is_number_integer() ? std::optional<int64_t>(user->get<int64_t>()) : std::nullopt,
        nonRoot && nonRoot->is_boolean() && nonRoot->get<bool>()});
    in.podGpus = *podGpus;
  }
  in.gpuWords = in.gpusFromClaims ? "GPUs" : std::string(names::kGpuResource);
  if (!allRequests.empty()) {
    // Every GPU of the node: nothing else can be allocated beside it.
    if (allRequests.size() > 1 || in.podGpus > 0) {
      return makeError("container " + inQuotes(allRequests.front()) +
                       " asks every GPU of the node (a resource claim request of allocationMode All) beside other "
                       "GPUs of the pod, which no node can give: ask All alone, or exact counts (exactly.count)");
    }
    in.allGpus = true;
  }
  return {};
}

// The DataLoader's workers and prefetch factor, and the ranks, from the annotations or config.
Result<void> readDataLoaderCounts(const json& pod, const PodDefaults& defaults, PodInputs& in) {
  auto workers = countAnnotation(pod, names::kWorkers, defaults.workers, "config defaults.workers", 0,
                                 "set it to the DataLoader's num_workers, e.g. \"8\"");
  if (!workers) return workers.error();
  in.workers = workers->value;
  if (workers->warning) in.warnings.push_back(std::move(*workers->warning));
  auto prefetch = countAnnotation(pod, names::kPrefetchFactor, defaults.prefetchFactor,
                                  "config defaults.prefetchFactor", 1,
                                  "set it to the DataLoader's prefetch_factor, e.g. \"2\"");
  if (!prefetch) return prefetch.error();
  in.prefetchFactor = prefetch->value;
  // No workers, no prefetch: a default for it changes nothing, so it is not warned of.
  if (prefetch->warning && in.workers > 0) in.warnings.push_back(std::move(*prefetch->warning));
  if (auto ranks = annotation(pod, names::kRanksPerPod)) {
    auto value = parseCount(*ranks);
    const char* hint = "set it to the training processes in the pod, e.g. \"8\"";
    if (!value) return annotationError(names::kRanksPerPod, value.error().message, hint);
    if (*value == 0) return annotationError(names::kRanksPerPod, "\"0\" must be at least 1", hint);
    in.ranks = *value;
  }
  return {};
}

// The NCCL communicators each rank makes, and where the number came from.
Result<void> readNcclCommunicators(const json& pod, const PodDefaults& defaults, PodInputs& in) {
  const bool communicatorsSet = annotation(pod, names::kNcclCommunicators).has_value();
  auto communicators = countAnnotation(
      pod, names::kNcclCommunicators, defaults.ncclCommunicators, "config defaults.ncclCommunicators", 0,
      "set it to the process groups each rank makes (1 for DDP, 3 for a data × tensor parallel mesh), or \"0\" "
      "for a pod that runs no NCCL");
  if (!communicators) return communicators.error();
  in.ncclCommunicators = communicators->value;
  if (communicators->warning) in.warnings.push_back(std::move(*communicators->warning));
  in.ncclCommunicatorsFrom =
      communicatorsSet ? std::string(names::kNcclCommunicators) : "config defaults.ncclCommunicators";
  return {};
}

// Node-exclusive or shared, and the GPUs per node the pod's nodeSelector asks.
Result<void> readPlacement(const json& pod, const json& spec, PodInputs& in) {
  auto placement = annotation(pod, names::kPlacement);
  if (!placement) {
    in.warnings.push_back(std::string(names::kPlacement) + " not set: using node-exclusive (one pod per node)");
  } else if (*placement == names::kShared) {
    in.nodeExclusive = false;
  } else if (*placement != names::kNodeExclusive) {
    return annotationError(names::kPlacement, inQuotes(*placement) + " is not a placement",
                           "use node-exclusive or shared");
  }

  // The scheduler compares label values as strings: "08" matches no node the operator
  // labelled "8", so only the count as the operator writes it is read as one.
  const json* selector = memberPtr(spec, "nodeSelector");
  const json* g = selector ? memberPtr(*selector, names::kGpuCount) : nullptr;
  if (g != nullptr) {
    const std::string text = g->is_string() ? g->get<std::string>() : g->dump();
    auto value = parseCount(text);
    if (!value || *value == 0 || std::to_string(*value) != text) {
      return makeError("nodeSelector " + std::string(names::kGpuCount) + ": " +
                       inQuotes(cutUtf8(text, 64)) + " matches no node podshaper labels; it writes the GPU count " +
                       "in decimal with no sign or leading zeros, e.g. \"8\"");
    }
    in.requestedNodeGpus = *value;
  }
  return {};
}

}  // namespace

Result<PodInputs> readPodInputs(const json& pod, const PodDefaults& defaults, const PodClaimGpus& claims) {
  PodInputs in;
  const json* spec = memberPtr(pod, "spec");
  const json* containers = spec ? memberPtr(*spec, "containers") : nullptr;
  if (containers == nullptr || !containers->is_array()) {
    return makeError("the object is not a Pod: spec.containers is missing");
  }
  in.warnings = claims.warnings;
  if (auto read = readGpuContainers(*spec, *containers, claims, in); !read) return read.error();
  if (in.gpuContainers.empty()) return in;  // nothing to shape; the caller allows as is
  if (auto read = readDataLoaderCounts(pod, defaults, in); !read) return read.error();
  if (auto read = readNcclCommunicators(pod, defaults, in); !read) return read.error();
  // With no workers no batch goes through /dev/shm: its size is needed only when given.
  if (in.workers == 0 && !annotation(pod, names::kBatchBytes) && !annotation(pod, names::kBatchShape)) {
    in.batch = BatchSize{0, "not needed with 0 workers"};
  } else {
    auto batch = readBatch(pod, in.workers);
    if (!batch) return batch.error();
    in.batch = std::move(batch->size);
    if (batch->warning) in.warnings.push_back(std::move(*batch->warning));
  }
  if (auto read = readPlacement(pod, *spec, in); !read) return read.error();
  return in;
}

}  // namespace podshaper
