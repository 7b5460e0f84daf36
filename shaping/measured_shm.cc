#include "shaping/measured_shm.h"

#include <algorithm>

#include "api/names.h"
#include "base/checked.h"
#include "base/json_util.h"
#include "base/quantity.h"
#include "base/text.h"

namespace podshaper {

using json = nlohmann::json;

Result<PodProfile> podProfile(const json& pod, uint64_t ranks, const ShmSettings& settings,
                              const AdmissionContext& context) {
  PodProfile out;
  ShmSizing sizing = settings.sizing;
  if (auto asked = annotation(pod, names::kShmSizing)) {
    auto parsed = parseShmSizing(*asked);
    if (!parsed) {
      return makeError(std::string(names::kShmSizing) + " " + inQuotes(*asked) +
                       " is not one of formula, measured, recommend");
    }
    sizing = *parsed;
  }
  auto workload = workloadOf(pod);
  if (!workload) return workload.error();
  if (!*workload) return out;
  const std::string inputs = declaredInputs(pod);
  out.profiled = ProfiledPod{(*workload)->profile, ranks, inputs};
  if (sizing == ShmSizing::kFormula || !context.shmProfiles) return out;
  auto object = context.shmProfiles(context.namespaceName, (*workload)->profile);
  if (!object) return out;  // no run measured yet: the formula's
  const std::string named = "ShmProfile " + inQuotes((*workload)->profile) + " of " + (*workload)->words();
  auto recommendation = profileRecommendation(*object, inputs);
  if (!recommendation) {
    out.warnings.push_back(named + " is not applied: " + recommendation.error().message +
                           "; /dev/shm sized by the formula");
    return out;
  }
  // Its runs' age is the operator's to judge (it drops the expired ones): all it keeps count.
  if (!*recommendation) {
    out.warnings.push_back(named + " has no run with the pod's declared inputs (its DataLoader or NCCL annotations "
                           "changed since its runs): /dev/shm sized by the formula");
    return out;
  }
  out.measured = MeasuredShm{(*workload)->profile, std::move(**recommendation), sizing, context.now};
  return out;
}

std::vector<std::string> applyMeasured(ShmPlan& plan, const MeasuredShm& measured, uint64_t ranks) {
  const Recommendation& r = measured.recommendation;
  const uint64_t floor = std::max(kMinShmBytes, ceilMiB(plan.ncclReserveBytes) * kMiB);
  const uint64_t bytes = r.bytesFor(ranks, floor);
  std::string words = r.words(ranks, bytes, measured.now ? std::optional(measured.now) : std::nullopt);
  if (bytes == floor && r.bytesFor(ranks) < floor) {
    words += ", raised to " + formatBytes(static_cast<int64_t>(floor)) +
             (plan.ncclReserveBytes > kMinShmBytes ? " (NCCL's reserve)" : " (the least podshaper gives)");
  }
  const std::string profile = "ShmProfile " + inQuotes(measured.profile);
  const std::string formulaBytes = formatBytes(static_cast<int64_t>(plan.shmBytes));
  if (measured.sizing == ShmSizing::kRecommend) {
    plan.formula += "; measured would give " + formatBytes(static_cast<int64_t>(bytes)) + " (" + profile + ")";
    return {profile + " measured: " + words + "; /dev/shm is the formula's " + formulaBytes + ": set " +
            std::string(names::kShmSizing) + ": measured to size it from the measured runs"};
  }
  plan.formula = "measured: " + words + " (" + profile + "); the formula gives " + formulaBytes + ": " + plan.formula;
  plan.shmBytes = bytes;
  return {};
}

}  // namespace podshaper
