#pragma once

// A workload's ShmProfile (docs/shm.md "Sizing from measured use"): the runs of its pods
// that podshaper-shm measured, and the /dev/shm its next pod needs. The operator writes it
// (judging/shm_profile_plan.h), the webhook applies it at admission (shaping/pod_shm.cc),
// `review` shows it; all three read it through this file.

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "base/result.h"

namespace podshaper {

// The workload a pod belongs to, as admission can know it: the user's
// podshaper.io/workload annotation, else the controller its labels and ownerReferences
// name (a Job, the CronJob above it, a JobSet's replicated job, a Kubeflow job's replica
// type, a Ray worker group, a LeaderWorkerSet, a Deployment, a StatefulSet, any other
// controller). Only ever matched within the pod's namespace.
struct Workload {
  std::string kind;     // "Job", "JobSet", ...; "" for the user's annotation
  std::string name;     // the controller's name, with its group where it has one ("llama/workers")
  std::string profile;  // the ShmProfile's name: a DNS subdomain ("job.train", "jobset.llama.workers")
  // "Job train", "JobSet llama, replicated job workers", "workload train-7b (podshaper.io/workload)".
  std::string words() const;
};

// The profile's name for a controller's kind and name: "<kind>.<name>[.<group>]",
// lowercase, anything a name cannot hold made '-', and no part between dots empty or
// starting or ending with '-' (a Ray group "a..b_" is a label value, not a name); a name
// too long is cut and given the whole one's hash (withinLength).
std::string profileName(std::string_view kind, std::string_view name);
// `name` (lowercase letters, digits, '-' and '.') if at most `max` bytes, else cut to end on
// a letter or digit and given "-" and 8 hex digits of the whole one's hash.
std::string withinLength(std::string name, std::size_t max);

// nullopt: a pod no controller made and no annotation names (a bare pod has no next run).
// An error: the annotation is not a name a ShmProfile can have.
Result<std::optional<Workload>> workloadOf(const nlohmann::json& pod);
// The pod's workload as its controller and its labels say, without the annotation and
// without taking a Job for its CronJob: one run of a job, not the runs that share a profile.
std::optional<Workload> controllerWorkloadOf(const nlohmann::json& pod);

// The declared inputs of a pod's /dev/shm (its DataLoader and NCCL annotations, not its
// ranks), as a short hash: runs of other inputs are not used to size it.
std::string declaredInputs(const nlohmann::json& pod);

// What the webhook writes on a pod it shaped with a workload (podshaper.io/shm-profile),
// read by the operator to put the pod's runs in its profile:
// "job.train; ranks=2; inputs=3f9a0c12".
struct ProfiledPod {
  std::string profile;
  uint64_t ranks = 0;
  std::string inputs;
  std::string annotation() const;
};
std::optional<ProfiledPod> parseProfiledPod(std::string_view annotation);

// How a run ended.
enum class RunEnd {
  kCompleted,     // the pod succeeded
  kFailed,        // the pod failed, not for /dev/shm
  kShmExhausted,  // it died of a full /dev/shm (judging/shm_exhausted.h)
  kEnded,         // a container restarted, or the pod went, without either
};
const char* toString(RunEnd end);  // "Completed", "Failed", "ShmExhausted", "Ended"
std::optional<RunEnd> parseRunEnd(std::string_view text);

// One run of one of the workload's pods, as status.runs keeps it.
struct ProfileRun {
  std::string pod;
  std::string podUID;
  int64_t run = 0;          // podshaper-shm's number of the run in the pod (1 the first)
  int64_t endedAt = 0;      // seconds since the epoch
  uint64_t ranks = 0;       // the pod's
  uint64_t sizeBytes = 0;   // its /dev/shm
  uint64_t peakBytes = 0;   // the most it used
  RunEnd end = RunEnd::kEnded;
  std::string inputs;       // declaredInputs of the pod
  // What the run needed: its peak, or for one that died of a full /dev/shm at least
  // kDeathFactor times its size (it needed more than it had, by an unknown amount).
  uint64_t needBytes() const;
  nlohmann::json toJson() const;
};
inline constexpr uint64_t kDeathFactor = 2;

// The operator's settings of the profiles (its config shmProfiles).
struct ProfileSettings {
  std::size_t runsKept = 10;
  int64_t maxAgeSeconds = 14 * 24 * 3600;
  uint64_t headroomPercent = 20;
};

// Runs vary wildly when the highest per-rank need is more than this many times the lowest.
inline constexpr uint64_t kVariesFactor = 2;

// The recommendation from the runs of one set of declared inputs.
struct Recommendation {
  std::string inputs;
  std::size_t runs = 0;             // of these inputs
  std::size_t deaths = 0;           // of them, died of a full /dev/shm, no later run measured past
  uint64_t needPerRank = 0;         // the highest need per rank, bytes, rounded up
  uint64_t lowestPerRank = 0;       // the lowest
  uint64_t peakPerRank = 0;         // the highest peak per rank (deaths' peaks included)
  int64_t lastEndedAt = 0;
  uint64_t headroomPercent = 0;
  bool varies() const { return lowestPerRank > 0 && needPerRank > lowestPerRank * kVariesFactor; }
  // needPerRank × ranks × (1 + headroom), rounded up to a whole MiB, at least `floorBytes`.
  // The per-rank need was rounded up, so × ranks it is taken less the ranks-1 bytes that
  // rounding can add: a peak of 412Mi over 3 ranks gives 412Mi again, not 412Mi + 2 bytes.
  uint64_t bytesFor(uint64_t ranks, uint64_t floorBytes = 0) const;
  // "peak 412Mi per 2 ranks over 3 runs, the last 2 h ago, + 20% = 495Mi" (`now`: seconds
  // since the epoch; without it "the last ended 2026-12-02T15:00:00Z"), with a death's and
  // a wide spread's words where there are.
  std::string words(uint64_t ranks, uint64_t bytes, std::optional<int64_t> now) const;
};

// From the runs of `inputs` (all runs when empty: those of the latest run's inputs), the
// ones within settings.maxAgeSeconds of `now`; nullopt when there are none. A death counts
// as kDeathFactor × its size until a later run that did not die peaks above that size;
// then it is left out.
std::optional<Recommendation> recommend(const std::vector<ProfileRun>& runs, std::string_view inputs,
                                        int64_t now, const ProfileSettings& settings);

// A ShmProfile as read: its runs, newest last, and the recommendation its status carries.
struct ShmProfile {
  std::string namespaceName, name;
  std::string workload;  // spec.workload, words
  std::vector<ProfileRun> runs;
  uint64_t headroomPercent = 0;     // status.recommendation.headroomPercent
  uint64_t needPerRank = 0;         // status.recommendation.needPerRankBytes
};

// Reads a ShmProfile. An error says what is wrong with it: a member of the wrong type, a
// count or time that does not parse, a run whose peak is above its size, a recommendation
// that is not the one its runs give (a status edited by hand): such a profile is never applied.
// Runs that needed nothing (peaks of 0) have no recommendation: needPerRank 0.
Result<ShmProfile> readShmProfile(const nlohmann::json& object);

// The profile's status as the operator writes it: runs, the recommendation for the
// latest run's ranks and the columns `kubectl get shmprofiles` shows.
nlohmann::json shmProfileStatus(const std::vector<ProfileRun>& runs, const ProfileSettings& settings, int64_t now);

// What of a ShmProfile the webhook's watch keeps (its informer's transform): the profile
// read once, at its watch event, into the recommendation of each declared inputs of its
// runs, or why it does not read (readShmProfile's error).
void keepShmProfile(nlohmann::json& object);

// The recommendation a ShmProfile, as kept or whole, gives a pod of `inputs`: nullopt when
// none of its runs had them; an error when it does not read (it is never applied).
Result<std::optional<Recommendation>> profileRecommendation(const nlohmann::json& object, std::string_view inputs);

}  // namespace podshaper
