#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "api/shm_profile.h"

// One look at a workload's ShmProfile, decided (docs/operator.md "ShmProfiles: sizing from
// measured use"): from the profile as the API holds it, the workload's pods as the
// operator's cache keeps them, their ShmUsages and the time, to the runs it keeps, the one
// write to make and when to look again. Pure: operator/shm_profile_controller.cc reads,
// writes and looks again.
namespace podshaper {

// A run's end (podshaper-shm's endedAt) and a container's termination (the kubelet's
// finishedAt) are the same stop when they are this close: both are seen on the pod's node,
// by its clock, within a sample or two.
inline constexpr int64_t kRunEndMatchSeconds = 60;

// The pod's podshaper.io/shm-profile, where it parses.
std::optional<ProfiledPod> profiledPod(const nlohmann::json& pod);

// The runs of one pod that ended, each with how it ended.
struct PodRuns {
  // Each ended run of its ShmUsage. The one whose end is within kRunEndMatchSeconds of a
  // container's death of a full /dev/shm (judgeTerminations) ended kShmExhausted; the one
  // that ended with the pod (its phase Succeeded or Failed) kCompleted or kFailed; any
  // other kEnded (a restart, or an end not told yet).
  std::vector<ProfileRun> measured;
  // A death of a full /dev/shm after every run its ShmUsage ended (podshaper-shm is not
  // installed, or its write is not there yet): a run of the size the pod's
  // podshaper.io/shm-size says, counted as full (peak = size), numbered as podshaper-shm
  // will number it (its open run's number, else the next), so that the measured run
  // replaces it when it comes; a run the profile has of that number already is not
  // replaced by it. It ended at the termination's finishedAt (else when the pod was made,
  // else `now`: a time that does not move between looks).
  std::optional<ProfileRun> unmeasuredDeath;
};

// The runs of `pod` (whose podshaper.io/shm-profile is `profiled`); its ShmUsage
// `shmUsage` (null: none) is not read when it is of another uid.
PodRuns podRuns(const nlohmann::json& pod, const nlohmann::json* shmUsage, const ProfiledPod& profiled, int64_t now);

// A pod of the workload and its ShmUsage.
struct ProfilePod {
  const nlohmann::json* pod = nullptr;
  const nlohmann::json* shmUsage = nullptr;  // null: none in the cache
};

struct ShmProfileInputs {
  std::string namespaceName, name;           // the profile's
  const nlohmann::json* existing = nullptr;  // the ShmProfile as the API returned it; null: none
  // The workload's pods; those whose podshaper.io/shm-profile does not name this profile,
  // or that are of another namespace, are passed over.
  std::vector<ProfilePod> pods;
  int64_t now = 0;  // seconds since the epoch
  ProfileSettings settings;
};

// The one write a look makes.
enum class ProfileWrite {
  kNone,    // nothing changed (or nothing to keep and no profile)
  kCreate,  // the first run of a workload without a profile: the object, then its status
  kStatus,  // the status changed: PUT .../status with the resourceVersion read
  kDelete,  // the profile exists and none of its runs is left: expired
};
const char* toString(ProfileWrite write);  // "none", "create", "status", "delete"

struct ShmProfilePlan {
  ProfileWrite write = ProfileWrite::kNone;
  // What the profile keeps: its runs and the pods', by (pod uid, run), the newer word
  // replacing the older, oldest first, none older than settings.maxAgeSeconds, at most
  // settings.runsKept.
  std::vector<ProfileRun> runs;
  // kCreate: the object to create (its status is written next: the API server drops the
  // status of an object created through the main resource). kStatus: the profile read with
  // `status` in place, its resourceVersion the write's precondition.
  nlohmann::json object;
  nlohmann::json status;        // kCreate, kStatus: shmProfileStatus of `runs`
  std::string resourceVersion;  // kDelete: the profile's, the delete's precondition
  // When a kept run expires (the oldest's endedAt + maxAge + 1 s): look again then.
  std::optional<int64_t> lookAgainAt;
  // Set when the profile read has a status that does not read (edited by hand, or of
  // another version): why. Its runs are not kept; the pods' runs start it again.
  std::string unreadable;
};

ShmProfilePlan planShmProfile(const ShmProfileInputs& in);

}  // namespace podshaper
