#include "judging/shm_profile_plan.h"

#include <algorithm>
#include <cstdint>
#include <map>
#include <tuple>
#include <utility>

#include "api/names.h"
#include "base/json_util.h"
#include "base/quantity.h"
#include "base/timefmt.h"
#include "judging/shm_exhausted.h"

namespace podshaper {
namespace {

using json = nlohmann::json;

// What readShmProfile takes of a run: a size of 1 byte to 1 PiB, 1 to 1,000,000 ranks. A run
// outside them (a size not sampled) is not kept, so that the profile written reads back.
constexpr uint64_t kMaxRunBytes = 1ULL << 50;
constexpr uint64_t kMaxRanks = 1'000'000;

// The run whose end is closest to `at`, within kRunEndMatchSeconds; null: none.
ProfileRun* endedNear(std::vector<ProfileRun>& runs, int64_t at) {
  auto apart = [at](const ProfileRun& run) { return run.endedAt > at ? run.endedAt - at : at - run.endedAt; };
  ProfileRun* best = nullptr;
  for (ProfileRun& run : runs) {
    if (apart(run) <= kRunEndMatchSeconds && (best == nullptr || apart(run) < apart(*best))) best = &run;
  }
  return best;
}

// When the pod's last container stopped (its phase Succeeded or Failed): the latest
// finishedAt of its containers' current terminations; unset when none says.
std::optional<int64_t> podFinishedAt(const json& pod) {
  std::optional<int64_t> last;
  for (const json& cs : member(member(pod, "status"), "containerStatuses")) {
    const auto at = parseTime(stringMember(member(member(cs, "state"), "terminated"), "finishedAt"));
    if (at && (!last || *at > *last)) last = *at;
  }
  return last;
}

std::vector<ProfileRun> keptRuns(std::vector<ProfileRun> runs, int64_t now, const ProfileSettings& settings) {
  std::stable_sort(runs.begin(), runs.end(), [](const ProfileRun& a, const ProfileRun& b) {
    return std::tie(a.endedAt, a.podUID, a.run) < std::tie(b.endedAt, b.podUID, b.run);
  });
  std::erase_if(runs, [&](const ProfileRun& r) { return now - r.endedAt > settings.maxAgeSeconds; });
  if (runs.size() > settings.runsKept) {
    runs.erase(runs.begin(), runs.end() - static_cast<std::ptrdiff_t>(settings.runsKept));
  }
  return runs;
}

// The workload in words for spec.workload: the first pod's, else the profile's name.
std::string workloadWords(const std::vector<const json*>& pods, const std::string& profile) {
  for (const json* pod : pods) {
    auto workload = workloadOf(*pod);
    if (workload && *workload) return (*workload)->words();
  }
  return profile;
}

}  // namespace

std::optional<ProfiledPod> profiledPod(const json& pod) {
  auto text = annotation(pod, names::kShmProfile);
  return text ? parseProfiledPod(*text) : std::nullopt;
}

PodRuns podRuns(const json& pod, const json* shmUsage, const ProfiledPod& profiled, int64_t now) {
  PodRuns out;
  std::vector<ProfileRun>& runs = out.measured;
  if (profiled.ranks == 0 || profiled.ranks > kMaxRanks) return out;
  const json& metadata = member(pod, "metadata");
  const std::string name = stringMember(metadata, "name"), uid = stringMember(metadata, "uid");
  auto run = [&](int64_t number, int64_t endedAt, uint64_t size, uint64_t peak, RunEnd end) {
    // A sample never holds more than the size; a peak above it is the size.
    return ProfileRun{name, uid, number, endedAt, profiled.ranks, size, std::min(peak, size), end, profiled.inputs};
  };
  const std::optional<ShmMeasured> measured = shmUsage ? shmMeasured(*shmUsage, pod) : std::nullopt;
  if (measured) {
    for (const ShmRunMeasured& r : measured->runs) {
      if (!r.ended || r.sizeBytes == 0 || r.sizeBytes > kMaxRunBytes) continue;
      runs.push_back(run(r.run, r.endedAt, r.sizeBytes, r.peakBytes, RunEnd::kEnded));
    }
  }
  // The run that ended with the pod.
  const std::string phase = stringMember(member(pod, "status"), "phase");
  if (phase == "Succeeded" || phase == "Failed") {
    if (auto at = podFinishedAt(pod)) {
      if (ProfileRun* last = endedNear(runs, *at)) {
        last->end = phase == "Succeeded" ? RunEnd::kCompleted : RunEnd::kFailed;
      }
    }
  }
  // Deaths of a full /dev/shm: the measured run that ended then, else a run not measured yet.
  int64_t lastEnd = INT64_MIN;
  for (const ProfileRun& r : runs) lastEnd = std::max(lastEnd, r.endedAt);
  std::optional<int64_t> unmeasuredDeath;
  for (const ShmFailure& f : judgeTerminations(pod, {}, shmUsage)) {
    const int64_t at = f.finishedAt != 0 ? f.finishedAt
                                         : parseTime(stringMember(metadata, "creationTimestamp")).value_or(now);
    if (ProfileRun* died = endedNear(runs, at)) {
      died->end = RunEnd::kShmExhausted;
    } else if (at > lastEnd && (!unmeasuredDeath || at > *unmeasuredDeath)) {
      unmeasuredDeath = at;
    }
  }
  if (unmeasuredDeath) {
    const auto size = parseQuantity(annotation(pod, names::kShmSize).value_or(""));
    if (size && *size > 0 && static_cast<uint64_t>(*size) <= kMaxRunBytes) {
      int64_t number = 1;
      if (measured && !measured->runs.empty()) {
        const ShmRunMeasured& open = measured->runs.back();
        number = open.ended ? open.run + 1 : open.run;
      }
      const auto bytes = static_cast<uint64_t>(*size);
      out.unmeasuredDeath = run(number, *unmeasuredDeath, bytes, bytes, RunEnd::kShmExhausted);
    }
  }
  return out;
}

const char* toString(ProfileWrite write) {
  switch (write) {
    case ProfileWrite::kNone: return "none";
    case ProfileWrite::kCreate: return "create";
    case ProfileWrite::kStatus: return "status";
    case ProfileWrite::kDelete: return "delete";
  }
  return "none";
}

ShmProfilePlan planShmProfile(const ShmProfileInputs& in) {
  ShmProfilePlan plan;
  // By (pod uid, run): what the profile holds, then what the pods say now.
  std::map<std::pair<std::string, int64_t>, ProfileRun> runs;
  if (in.existing != nullptr) {
    // A profile made whose status is not written yet has no runs, and says nothing wrong.
    const json& listed = member(member(*in.existing, "status"), "runs");
    if (!listed.is_null() && !(listed.is_array() && listed.empty())) {
      if (auto read = readShmProfile(*in.existing)) {
        for (ProfileRun& r : read->runs) runs[{r.podUID, r.run}] = std::move(r);
      } else {
        plan.unreadable = read.error().message;
      }
    }
  }
  std::vector<const json*> pods;
  for (const ProfilePod& p : in.pods) {
    if (p.pod == nullptr || stringMember(member(*p.pod, "metadata"), "namespace") != in.namespaceName) continue;
    const auto profiled = profiledPod(*p.pod);
    if (!profiled || profiled->profile != in.name) continue;
    pods.push_back(p.pod);
    PodRuns pod = podRuns(*p.pod, p.shmUsage, *profiled, in.now);
    for (ProfileRun& r : pod.measured) {
      auto [at, added] = runs.try_emplace({r.podUID, r.run}, r);
      if (added) continue;
      // Ended says nothing new of how a run ended: the end told while it was its pod's
      // latest (a death, before a restart hid it) stays.
      const RunEnd told = at->second.end;
      at->second = std::move(r);
      if (at->second.end == RunEnd::kEnded) at->second.end = told;
    }
    // A guess, not a measure: what the profile has of that run stays (the measured run,
    // read before the ShmUsages' cache was filled again).
    if (pod.unmeasuredDeath) {
      ProfileRun& death = *pod.unmeasuredDeath;
      runs.try_emplace({death.podUID, death.run}, std::move(death));
    }
  }
  std::vector<ProfileRun> all;
  for (auto& [key, run] : runs) all.push_back(std::move(run));
  plan.runs = keptRuns(std::move(all), in.now, in.settings);
  if (!plan.runs.empty()) plan.lookAgainAt = plan.runs.front().endedAt + in.settings.maxAgeSeconds + 1;

  if (plan.runs.empty()) {
    if (in.existing != nullptr) {
      plan.write = ProfileWrite::kDelete;
      plan.resourceVersion = stringMember(member(*in.existing, "metadata"), "resourceVersion");
    }
    return plan;
  }
  plan.status = shmProfileStatus(plan.runs, in.settings, in.now);
  if (in.existing == nullptr) {
    plan.write = ProfileWrite::kCreate;
    plan.object = {{"apiVersion", names::kGroupVersion},
                   {"kind", names::kShmProfileKind},
                   {"metadata",
                    {{"name", in.name},
                     {"namespace", in.namespaceName},
                     {"labels", {{std::string(names::kManagedByLabel), names::kManagedBy}}}}},
                   {"spec", {{"workload", workloadWords(pods, in.name)}}}};
    return plan;
  }
  if (member(*in.existing, "status") == plan.status) return plan;
  plan.write = ProfileWrite::kStatus;
  plan.object = *in.existing;
  plan.object["status"] = plan.status;
  return plan;
}

}  // namespace podshaper
