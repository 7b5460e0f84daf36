#pragma once

#include <array>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "judging/events.h"

// Why a shaped pod died when /dev/shm ran out (docs/operator.md "Shaped pods explain
// themselves"). Pure: the operator's pod reconciler reads the pods podshaper shaped (label
// podshaper.io/shaped) and, where their termination messages were cut, their logs, and
// records what this says as ShmExhausted Events on the pod and its controller.
namespace podshaper {

namespace reasons {
inline constexpr const char* kShmExhausted = "ShmExhausted";
}  // namespace reasons

// What ran out of /dev/shm.
enum class ShmCause { kDataLoader, kNccl, kSigbus };
const char* toString(ShmCause cause);  // "dataloader", "nccl", "sigbus" (the metrics' label)
// Every cause: the metrics' series start from these.
inline constexpr std::array kShmCauses = {ShmCause::kDataLoader, ShmCause::kNccl, ShmCause::kSigbus};

struct ShmFailure {
  std::string container;
  ShmCause cause = ShmCause::kSigbus;
  // The run that died was not the container's first in this pod: its /dev/shm held
  // what earlier runs left.
  bool restarted = false;
  // Tells one failure once: pod uid, container, first or restarted run, cause.
  std::string key;
  long long finishedAt = 0;  // when the run died (its termination's finishedAt), seconds since the epoch; 0: not said
  EventSpec event;  // on the pod
};

// A run that ended with an error whose termination message (the log's last 2 KiB or 80
// lines) names no cause, although it was cut there: the log before it may (the tracebacks
// of a DataLoader's other workers often come after the Bus error line).
struct LogToRead {
  std::string container;
  bool previous = false;  // the run before the container's current one (pods/log previous=true)
  std::string key;        // "uid/container/run": read once
};
std::vector<LogToRead> logsToRead(const nlohmann::json& pod);

// What podshaper-shm measured of the pod's /dev/shm: its ShmUsage (docs/shm.md), as read.
struct ShmRunMeasured {
  long long run = 0;  // podshaper-shm's number of the run: 1 is the volume's first
  uint64_t sizeBytes = 0, peakBytes = 0;
  bool ended = false;  // it has an endedAt
  long long endedAt = 0;  // seconds since the epoch, when ended
};
struct ShmMeasured {
  std::string volume;                // the pod's volume measured ("podshaper-dshm" or the user's)
  bool userVolume = false;           // a volume of the user's, not podshaper's
  std::vector<ShmRunMeasured> runs;  // the last runs, oldest first
};

// The ShmUsage `shmUsage` of `pod`: unset when it is of another pod (its spec.podUID is not
// the pod's uid) or malformed (a member of the wrong type, a byte count below 0 or past
// what an int64 holds in whole Mi, an endedAt that is not a time).
std::optional<ShmMeasured> shmMeasured(const nlohmann::json& shmUsage, const nlohmann::json& pod);

// The lines of a log that judgeTerminations reads (those that speak of /dev/shm, SIGBUS
// or a DataLoader worker's death), joined, the first 8 KiB of them: what is worth keeping
// of a long log.
std::string shmEvidence(const std::string& log);

// Every terminated container (now, or its last run) that died for lack of /dev/shm:
// exit code 135 (SIGBUS), PyTorch DataLoader's shared-memory errors or NCCL's
// "No space left on device" on /dev/shm, read from its termination message (the log's
// tail: the webhook sets FallbackToLogsOnError), or where that names none, from
// `logs` (LogToRead::key → what was read of that run's log). With the pod's ShmUsage
// (`shmUsage`, null: none), each Event says what podshaper-shm measured of the run that
// died, where the ShmUsage is of the container's /dev/shm volume.
std::vector<ShmFailure> judgeTerminations(const nlohmann::json& pod,
                                          const std::map<std::string, std::string>& logs = {},
                                          const nlohmann::json* shmUsage = nullptr);

// The pod's controller (a Job, JobSet, ReplicaSet, …), which is told too; unset when none.
std::optional<ObjectRef> controllerOf(const nlohmann::json& pod);

// The same Event, told on the pod's controller: it names the pod.
EventSpec ownerEvent(const nlohmann::json& pod, const ShmFailure& failure);

}  // namespace podshaper
