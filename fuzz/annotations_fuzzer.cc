// The pod inputs webhook shaping reads (shaping/pod_inputs.h), reached directly:
// the input is split at '\n' into the values below, in order; a value "~" (or
// one past the end of the input) is left out. A training pod is built with
// them, read with readPodInputs(), and then admitted whole (the admission
// invariants of fuzz/admission_checks.h) under one of the fuzz settings.
//
//   0 podshaper.io/dataloader-workers   7 container "trainer" limits nvidia.com/gpu (default 8)
//   1 podshaper.io/prefetch-factor      8 container "sidecar" limits nvidia.com/gpu
//   2 podshaper.io/batch-bytes          9 spec.nodeSelector podshaper.io/gpu-count
//   3 podshaper.io/batch-shape         10 container "trainer" limits memory
//   4 podshaper.io/batch-dtype         11 the namespace (ml, baseline, opted-out, ...; default ml)
//   5 podshaper.io/ranks-per-pod       12 the setting: 1 or 2 for fuzzSettings()[1|2], else [0]
//   6 podshaper.io/placement           13 ulimits.noderesource.dev/container.trainer (NRI ulimits, YAML)
//                                      14 podshaper.io/nccl-communicators
//                                      15 container "trainer" env PET_NNODES

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "api/names.h"
#include "base/quantity.h"
#include "fuzz/admission_checks.h"
#include "fuzz/fuzz_check.h"
#include "shaping/pod_inputs.h"
#include "shaping/shm.h"

namespace {

using nlohmann::json;
using podshaper::Config;
namespace names = podshaper::names;

constexpr std::size_t kFields = 16;

std::vector<std::optional<std::string>> split(std::string_view text) {
  std::vector<std::optional<std::string>> fields(kFields);
  std::size_t i = 0;
  while (i < kFields) {
    std::size_t nl = text.find('\n');
    std::string_view v = text.substr(0, nl);
    if (v != "~") fields[i] = std::string(v);
    ++i;
    if (nl == std::string_view::npos) break;
    text.remove_prefix(nl + 1);
  }
  for (; i < kFields; ++i) fields[i] = i == 7 ? std::optional<std::string>("8") : std::nullopt;
  return fields;
}

json buildPod(const std::vector<std::optional<std::string>>& f) {
  json annotations = json::object();
  const std::string_view keys[] = {names::kWorkers,    names::kPrefetchFactor, names::kBatchBytes, names::kBatchShape,
                                   names::kBatchDtype, names::kRanksPerPod,    names::kPlacement};
  for (std::size_t i = 0; i < std::size(keys); ++i) {
    if (f[i]) annotations[std::string(keys[i])] = *f[i];
  }
  // Multi-line YAML in one field: a backslash and an 'n' stand for a newline.
  if (f[13]) {
    std::string ulimits;
    for (std::size_t i = 0; i < f[13]->size(); ++i) {
      if ((*f[13])[i] == '\\' && i + 1 < f[13]->size() && (*f[13])[i + 1] == 'n') {
        ulimits += '\n';
        ++i;
      } else {
        ulimits += (*f[13])[i];
      }
    }
    annotations[std::string(names::kUlimitAnnotationPrefix) + "trainer"] = ulimits;
  }
  if (f[14]) annotations[std::string(names::kNcclCommunicators)] = *f[14];
  json trainer = {{"name", "trainer"}, {"image", "pytorch"}, {"resources", {{"limits", json::object()}}}};
  if (f[7]) trainer["resources"]["limits"][std::string(names::kGpuResource)] = *f[7];
  if (f[10]) trainer["resources"]["limits"]["memory"] = *f[10];
  if (f[15]) trainer["env"] = json::array({{{"name", std::string(names::kNnodesEnv)}, {"value", *f[15]}}});
  json containers = json::array({trainer});
  if (f[8]) {
    containers.push_back({{"name", "sidecar"},
                          {"image", "busybox"},
                          {"resources", {{"limits", {{std::string(names::kGpuResource), *f[8]}}}}}});
  }
  json pod = {{"apiVersion", "v1"},
              {"kind", "Pod"},
              {"metadata",
               {{"name", "train-0"},
                {"labels", {{std::string(names::kInjectLabel), "true"}}},
                {"annotations", annotations}}},
              {"spec", {{"containers", containers}}}};
  if (f[9]) pod["spec"]["nodeSelector"][std::string(names::kGpuCount)] = *f[9];
  return pod;
}

std::string describe(const std::vector<std::optional<std::string>>& f) {
  std::string out;
  for (const auto& v : f) out += (v ? *v : "~") + " | ";
  return out;
}

// What readPodInputs() returned agrees with the values it was given.
void checkInputs(const json& pod, const std::vector<std::optional<std::string>>& f, const Config& config) {
  // The pod's GPUs as the containers ask them; past 64 bits is an error, not a wrapped sum.
  bool gpusOverflow = false;
  uint64_t gpus = 0;
  for (std::size_t i : {std::size_t{7}, std::size_t{8}}) {
    auto n = f[i] ? podshaper::parseCount(*f[i]) : podshaper::Result<uint64_t>(uint64_t{0});
    if (n.ok()) gpusOverflow |= __builtin_add_overflow(gpus, *n, &gpus);
  }
  auto read = podshaper::readPodInputs(pod, config.podDefaults);
  if (!read) {
    FUZZ_CHECK(!read.error().message.empty(), describe(f));
    return;
  }
  FUZZ_CHECK(!gpusOverflow, "the pod's GPUs overflow 64 bits but were read: " + describe(f));
  const podshaper::PodInputs& in = *read;
  for (const auto& c : in.gpuContainers) FUZZ_CHECK(c.gpus > 0, describe(f));
  FUZZ_CHECK(gpus == in.podGpus, describe(f));
  if (in.gpuContainers.empty()) return;
  FUZZ_CHECK(in.workers == (f[0] ? *podshaper::parseCount(*f[0]) : config.podDefaults.workers), describe(f));
  FUZZ_CHECK(in.prefetchFactor >= 1, describe(f));
  FUZZ_CHECK(in.prefetchFactor == (f[1] ? *podshaper::parseCount(*f[1]) : config.podDefaults.prefetchFactor), describe(f));
  FUZZ_CHECK(in.batch.bytes > 0 || (in.workers == 0 && !f[2] && !f[3]), describe(f));
  FUZZ_CHECK(!(f[2] && f[3]), "batch-bytes and batch-shape both accepted: " + describe(f));
  if (f[2]) FUZZ_CHECK(static_cast<int64_t>(in.batch.bytes) == *podshaper::parseQuantity(*f[2]), describe(f));
  if (f[3]) FUZZ_CHECK(in.batch.bytes == *podshaper::shapeBytes(*f[3], f[4].value_or("float32")), describe(f));
  FUZZ_CHECK(in.ranks.has_value() == f[5].has_value() && (!in.ranks || *in.ranks >= 1), describe(f));
  FUZZ_CHECK(in.nodeExclusive == (!f[6] || *f[6] == names::kNodeExclusive), describe(f));
  FUZZ_CHECK(in.requestedNodeGpus.has_value() == f[9].has_value(), describe(f));
  FUZZ_CHECK(in.ncclCommunicators == (f[14] ? *podshaper::parseCount(*f[14]) : config.podDefaults.ncclCommunicators), describe(f));

  // The next step: the /dev/shm size from these inputs is a plan or an overflow error.
  podshaper::ShmInputs shm;
  shm.ranks = in.ranks.value_or(in.podGpus);
  shm.workers = in.workers;
  shm.prefetchFactor = in.prefetchFactor;
  shm.batch = in.batch;
  shm.headroomPercent = config.shm.headroomPercent;
  shm.nccl = podshaper::planNcclReserve({shm.ranks, in.ncclCommunicators, in.ncclCommunicatorsFrom, in.span, false,
                                         config.shm.ncclShmPerCommunicator, in.ncclEnv, {}});
  FUZZ_CHECK((shm.nccl.transport == podshaper::NcclTransport::kNone) == (in.ncclCommunicators == 0 ||
                                            (in.span.kind == podshaper::JobSpan::kOneNode && shm.ranks <= 1)),
             describe(f));
  auto plan = podshaper::planShm(shm);
  if (plan) {
    FUZZ_CHECK(plan->shmBytes % (1024 * 1024) == 0 && plan->shmBytes >= plan->withHeadroomBytes, describe(f));
    FUZZ_CHECK(plan->withHeadroomBytes >= plan->payloadBytes, describe(f));
  } else {
    FUZZ_CHECK(plan.error().message.find("overflows") != std::string::npos, plan.error().message);
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const auto fields = split(podshaper::fuzz::asText(data, size));
  const json pod = buildPod(fields);
  const auto& settings = podshaper::fuzz::fuzzSettings();
  const auto& setting = settings[fields[12] == "1" ? 1 : fields[12] == "2" ? 2 : 0];
  checkInputs(pod, fields, setting.config);

  json review = {{"apiVersion", "admission.k8s.io/v1"},
                 {"kind", "AdmissionReview"},
                 {"request",
                  {{"uid", "fuzz"},
                   {"kind", {{"group", ""}, {"version", "v1"}, {"kind", "Pod"}}},
                   {"resource", {{"group", ""}, {"version", "v1"}, {"resource", "pods"}}},
                   {"namespace", fields[11].value_or("ml")},
                   {"operation", "CREATE"},
                   {"object", pod}}}};
  // Invalid UTF-8 cannot reach admission (the API server sends JSON): replace it.
  const std::string body = review.dump(-1, ' ', false, json::error_handler_t::replace);
  podshaper::fuzz::checkAdmission(body, setting.config, setting.cluster);
  return 0;
}
